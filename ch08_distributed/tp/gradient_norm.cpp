// The gradient norm of a split model (see gradient_norm.h).
#include "ch08_distributed/tp/gradient_norm.h"

#include <cmath>
#include <vector>

#include "common/ops/reduce.h"

namespace lab::ch08::tp {

double counted_sum_squares(const GPT2& model) {
  const ModelShard& shard = model.shard();
  const ParameterStore& params = model.parameters();
  double sum = 0;
  for (const ParamInfo& p : params.infos()) {
    if (shard.tp_rank != 0 && tp_split_of(p.name) == TpSplit::Replicated) continue;
    if (p.name == "wte.weight" && !shard.has_embedding) continue;  // the last stage's copy of the tied wte
    sum += ops::sum_squares(params.grad(p.name));
  }
  return sum;
}

double model_parallel_gradient_norm(const GPT2& model, const comm::ParallelContext& context) {
  // The partial sums travel as f32 (what every backend reduces): a relative error of about 1e-7 on the norm.
  const std::vector<float> host{static_cast<float>(counted_sum_squares(model))};
  const Tensor sum = Tensor::from_floats(host, {1}, model.device());
  if (context.tp().size() > 1) context.tp().all_reduce(sum, comm::ReduceOp::Sum);
  if (context.pp().size() > 1) context.pp().all_reduce(sum, comm::ReduceOp::Sum);
  return std::sqrt(static_cast<double>(sum.item()));
}

}  // namespace lab::ch08::tp
