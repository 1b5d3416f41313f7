// The embedding group (see tied_embedding.h).
#include "ch08_distributed/pp/tied_embedding.h"

namespace lab::ch08::pp {

TiedEmbedding::TiedEmbedding(const comm::ParallelContext& context) {
  const comm::ParallelLayout& layout = context.layout();
  if (layout.pp == 1) return;
  const comm::ParallelCoords& c = context.coords();
  // One group per pipeline (a dp index and a tp index), ordered by stage.
  const bool member = context.is_first_stage() || context.is_last_stage();
  group_ = context.world().split(member ? c.dp * layout.tp + c.tp : comm::kNoGroup, c.pp);
}

void TiedEmbedding::all_reduce_gradient(const GPT2& model) {
  if (group_) group_->all_reduce(model.parameters().grad("wte.weight"), comm::ReduceOp::Sum);
}

}  // namespace lab::ch08::pp
