#include "common/dist/dp_stage.h"

#include "common/core/error.h"

namespace lab::dist {

namespace {

constexpr DpStage kDpStages[] = {DpStage::Naive, DpStage::Bucketed, DpStage::Overlap};

}  // namespace

const char* dp_stage_name(DpStage stage) {
  switch (stage) {
    case DpStage::Naive: return "naive";
    case DpStage::Bucketed: return "bucketed";
    case DpStage::Overlap: return "overlap";
  }
  return "?";
}

std::vector<std::string> dp_stage_names() {
  std::vector<std::string> names;
  for (const DpStage s : kDpStages) names.emplace_back(dp_stage_name(s));
  return names;
}

DpStage parse_dp_stage(const std::string& name) {
  for (const DpStage s : kDpStages)
    if (name == dp_stage_name(s)) return s;
  fail(ErrorKind::InvalidArgument, "--dp-stage: '", name, "' is not one of naive|bucketed|overlap");
}

}  // namespace lab::dist
