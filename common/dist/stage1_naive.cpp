// Stage 1: one all-reduce per gradient tensor (see stage1_naive.h).
#include "common/dist/stage1_naive.h"

namespace lab::dist {

void NaiveAllReduce::reduce() {
  for (const ParamInfo& p : params_.infos()) average(group_, params_.grad(p.name));
}

}  // namespace lab::dist
