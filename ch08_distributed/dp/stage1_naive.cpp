// Stage 1: one all-reduce per gradient tensor (see stage1_naive.h).
#include "ch08_distributed/dp/stage1_naive.h"

namespace lab::ch08 {

void NaiveAllReduce::reduce() {
  for (const ParamInfo& p : params_.infos()) average(group_, params_.grad(p.name));
}

}  // namespace lab::ch08
