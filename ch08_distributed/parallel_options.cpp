// Names of the schedules, and the layout from the flags (see parallel_options.h).
#include "ch08_distributed/parallel_options.h"

#include "common/core/error.h"

namespace lab::ch08 {

namespace {

constexpr PpSchedule kPpSchedules[] = {PpSchedule::GPipe, PpSchedule::OneFOneB};

}  // namespace

const char* pp_schedule_name(PpSchedule schedule) {
  return schedule == PpSchedule::GPipe ? "gpipe" : "1f1b";
}

std::vector<std::string> pp_schedule_names() {
  std::vector<std::string> names;
  for (const PpSchedule s : kPpSchedules) names.emplace_back(pp_schedule_name(s));
  return names;
}

PpSchedule parse_pp_schedule(const std::string& name) {
  for (const PpSchedule s : kPpSchedules)
    if (name == pp_schedule_name(s)) return s;
  fail(ErrorKind::InvalidArgument, "--pp-schedule: '", name, "' is not one of gpipe|1f1b");
}

comm::ParallelLayout resolve_layout(int64_t dp, int64_t tp, int64_t pp, int ranks) {
  LAB_CHECK(dp >= 0 && tp >= 1 && pp >= 1, InvalidArgument, "--dp ", dp, " --tp ", tp, " --pp ", pp,
            ": --tp and --pp must be at least 1, --dp at least 0 (0: the ranks left over)");
  if (dp == 0) {
    LAB_CHECK(ranks % (tp * pp) == 0, InvalidArgument, "--tp ", tp, " x --pp ", pp, " = ", tp * pp,
              " does not divide the job's ", ranks, " rank(s) (mpirun -np)");
    dp = ranks / (tp * pp);
  }
  LAB_CHECK(dp * tp * pp == ranks, InvalidArgument, "--dp ", dp, " x --tp ", tp, " x --pp ", pp, " = ", dp * tp * pp,
            " ranks, but the job has ", ranks, " (mpirun -np ", ranks, ")");
  return {static_cast<int>(dp), static_cast<int>(tp), static_cast<int>(pp)};
}

}  // namespace lab::ch08
