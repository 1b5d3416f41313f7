// Model shards and the tensor-parallel cut of each parameter (see shard.h).
#include "common/nn/shard.h"

#include <cstring>

namespace lab {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Every split is "view the full tensor as [A, tp, B] and take index r of the middle dimension": rows are
// A = 1; columns are A = rows of the matrix; q, k and v are A = 3 blocks of rows.
struct SplitGeometry {
  int64_t outer = 1;  // A
  int64_t inner = 0;  // B: elements of one rank's piece of one outer slice
};

SplitGeometry geometry(const Shape& full, TpSplit split, int tp) {
  const int64_t numel = shape_numel(full);
  switch (split) {
    case TpSplit::Replicated: return {1, numel};
    case TpSplit::Rows:
      LAB_CHECK(!full.empty() && full[0] % tp == 0, InvalidArgument, "tensor parallelism: ", full.empty() ? 0 : full[0],
                " rows do not divide among ", tp, " ranks");
      return {1, numel / tp};
    case TpSplit::Columns:
      LAB_CHECK(full.size() == 2 && full[1] % tp == 0, InvalidArgument, "tensor parallelism: the columns of ",
                shape_str(full), " do not divide among ", tp, " ranks");
      return {full[0], full[1] / tp};
    case TpSplit::QkvRows:
      LAB_CHECK(!full.empty() && full[0] % (3 * tp) == 0, InvalidArgument, "tensor parallelism: q, k and v of ",
                shape_str(full), " do not divide among ", tp, " ranks");
      return {3, numel / (3 * tp)};
  }
  fail(ErrorKind::Internal, "unknown tensor-parallel split");
}

}  // namespace

ModelShard ModelShard::of_rank(const GPT2Config& config, int tp_rank, int tp_size, int pp_rank, int pp_size) {
  LAB_CHECK(pp_size >= 1 && 0 <= pp_rank && pp_rank < pp_size, InvalidArgument, "pipeline stage ", pp_rank, " of ",
            pp_size, " does not exist");
  LAB_CHECK(pp_size <= config.n_layer, InvalidArgument, "pipeline parallelism: ", pp_size, " stages for ",
            config.n_layer, " blocks (every stage needs at least one block)");
  ModelShard s;
  s.tp_rank = tp_rank;
  s.tp_size = tp_size;
  s.first_block = pp_rank * config.n_layer / pp_size;
  s.end_block = (pp_rank + 1) * config.n_layer / pp_size;
  s.has_embedding = pp_rank == 0;
  s.has_head = pp_rank == pp_size - 1;
  s.validate(config);
  return s;
}

void ModelShard::validate(const GPT2Config& config) const {
  LAB_CHECK(tp_size >= 1 && 0 <= tp_rank && tp_rank < tp_size, InvalidArgument, "tensor-parallel rank ", tp_rank,
            " of ", tp_size, " does not exist");
  LAB_CHECK(config.n_head % tp_size == 0, InvalidArgument, "tensor parallelism: ", config.n_head,
            " attention heads do not divide among ", tp_size, " ranks");
  const int end = block_end(config);
  LAB_CHECK(0 <= first_block && first_block <= end && end <= config.n_layer, InvalidArgument, "model shard: blocks [",
            first_block, ", ", end, ") are not within the model's ", config.n_layer);
  LAB_CHECK(first_block < end || (has_embedding && has_head), InvalidArgument,
            "model shard: a pipeline stage without blocks");
}

std::string ModelShard::str(const GPT2Config& config) const {
  return cat("tp ", tp_rank, "/", tp_size, ", blocks [", first_block, ", ", block_end(config), ")",
             has_embedding ? ", embedding" : "", has_head ? ", head" : "");
}

TpSplit tp_split_of(const std::string& name) {
  if (name == "wte.weight") return TpSplit::Rows;
  if (ends_with(name, "attn.c_attn.weight") || ends_with(name, "attn.c_attn.bias")) return TpSplit::QkvRows;
  if (ends_with(name, "mlp.c_fc.weight") || ends_with(name, "mlp.c_fc.bias")) return TpSplit::Rows;
  if (ends_with(name, "c_proj.weight")) return TpSplit::Columns;
  return TpSplit::Replicated;
}

Shape tp_shard_shape(const Shape& full, TpSplit split, int tp) {
  geometry(full, split, tp);  // checks divisibility
  Shape s = full;
  if (split == TpSplit::Rows || split == TpSplit::QkvRows) s[0] /= tp;
  if (split == TpSplit::Columns) s[1] /= tp;
  return s;
}

Tensor tp_slice(const Tensor& full, TpSplit split, int rank, int tp) {
  LAB_CHECK(full.is_cpu() && full.dtype() == DType::F32, InvalidArgument, "tp_slice takes a CPU f32 tensor");
  const SplitGeometry g = geometry(full.shape(), split, tp);
  Tensor out = Tensor::empty(tp_shard_shape(full.shape(), split, tp), DType::F32);
  if (split == TpSplit::Replicated) {
    out.copy_from(full);
    return out;
  }
  const float* src = full.data<float>();
  float* dst = out.data<float>();
  for (int64_t a = 0; a < g.outer; ++a)
    std::memcpy(dst + a * g.inner, src + (a * tp + rank) * g.inner, static_cast<size_t>(g.inner) * sizeof(float));
  return out;
}

Tensor tp_join(const Tensor& parts, TpSplit split, const Shape& full, int tp) {
  LAB_CHECK(parts.is_cpu() && parts.dtype() == DType::F32, InvalidArgument, "tp_join takes a CPU f32 tensor");
  const SplitGeometry g = geometry(full, split, tp);
  LAB_CHECK(parts.numel() == int64_t{tp} * g.outer * g.inner, InvalidArgument, "tp_join: ", parts.numel(),
            " elements are not ", tp, " parts of ", shape_str(full));
  Tensor out = Tensor::empty(full, DType::F32);
  if (split == TpSplit::Replicated) {
    out.copy_from(parts.view(0, full));  // every part is the whole tensor: take rank 0's
    return out;
  }
  const float* src = parts.data<float>();
  float* dst = out.data<float>();
  for (int r = 0; r < tp; ++r)
    for (int64_t a = 0; a < g.outer; ++a)
      std::memcpy(dst + (a * tp + r) * g.inner, src + (r * g.outer + a) * g.inner,
                  static_cast<size_t>(g.inner) * sizeof(float));
  return out;
}

}  // namespace lab
