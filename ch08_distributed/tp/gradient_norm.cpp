// The gradient norm of a split model (see gradient_norm.h).
#include "ch08_distributed/tp/gradient_norm.h"

#include "common/ops/reduce.h"

namespace lab::ch08::tp {

Tensor model_parallel_sum_squares(const GPT2& model, const comm::ParallelContext& context) {
  const ModelShard& shard = model.shard();
  const ParameterStore& params = model.parameters();
  const Tensor sum = Tensor::zeros({1}, DType::F32, model.device());
  for (const ParamInfo& p : params.infos()) {
    if (shard.tp_rank != 0 && tp_split_of(p.name) == TpSplit::Replicated) continue;
    if (p.name == "wte.weight" && !shard.has_embedding) continue;  // the last stage's copy of the tied wte
    ops::accumulate_sum_squares(sum, params.grad(p.name));
  }
  // The partial sums travel as f32 (what every backend reduces): a relative error of about 1e-7 on the norm.
  if (context.tp().size() > 1) context.tp().all_reduce(sum, comm::ReduceOp::Sum);
  if (context.pp().size() > 1) context.pp().all_reduce(sum, comm::ReduceOp::Sum);
  return sum;
}

}  // namespace lab::ch08::tp
