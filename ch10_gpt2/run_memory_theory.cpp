// Every rung's share of a run's memory theory, and a tensor- and pipeline-parallel rank's part of it (see
// run_memory_theory.h).
#include "ch10_gpt2/run_memory_theory.h"

#include <algorithm>
#include <cmath>

#include "ch07_memory/zero/zero_theory.h"
#include "ch09_advanced/attention_choice.h"

namespace lab {

namespace {

constexpr int64_t kFp32 = 4;  // bytes of every activation under --tp or --pp, and of the fp32 state

// What a block keeps per token: its elements (statistics included) and attention's own bytes.
struct BlockActivations {
  int64_t elements = 0;
  int64_t attention_bytes = 0;
  int64_t bytes() const { return elements * kFp32 + attention_bytes; }
};

// What one block keeps per token on one of `tp` tensor-parallel ranks, from `whole`, the whole model's theory
// under `policy`. A block that keeps all it computes (no recompute) keeps 12 C of its elements split (qkv 3C,
// the attention output C, c_fc's output 4C, the GELU 4C), the other 4 C whole (the LayerNorms' inputs and outputs;
// neither a row-parallel layer's partial sum nor the sum is kept: no backward reads them) and its H / T heads'
// attention rows. Block recompute keeps the block's input, a
// whole [B, T, C] on every rank; selective recompute is refused with --tp, so at tp 1 it is the whole model's.
BlockActivations block_on_tp_rank(const ch07::MemoryTheory& whole, ch07::RecomputePolicy policy, int64_t C, int tp) {
  BlockActivations b{whole.activation_elements_per_token_per_block, whole.attention_bytes_per_token_per_block};
  if (tp == 1 || policy != ch07::RecomputePolicy::None) return b;
  b.elements += 12 * C / tp - 12 * C;
  b.attention_bytes /= tp;
  return b;
}

// The rank's parameters: its stage's blocks cut by tp, wte's slice on the first and the last stage (each holds
// a copy: the head is tied to it), wpe on the first, ln_f on the last (see run_memory_theory.h).
int64_t rank_parameters(const GPT2Config& m, int tp, int64_t blocks, bool embedding, bool head) {
  const int64_t C = m.n_embd;
  const int64_t split_per_block = 12 * C * C + 7 * C;  // c_attn, c_fc (weights and biases), both c_proj weights
  const int64_t whole_per_block = 6 * C;               // ln_1, ln_2, both c_proj biases
  int64_t parameters = blocks * (split_per_block / tp + whole_per_block);
  if (embedding || head) parameters += m.padded_vocab_for(tp) * C / tp;  // wte
  if (embedding) parameters += int64_t{m.block_size} * C;                // wpe
  if (head) parameters += 2 * C;                                         // ln_f
  return parameters;
}

// Replaces the whole model's theory `t` (one micro-batch) with what the rank at `rank` of the run's tensor- and
// pipeline-parallel layout holds. `none` is the whole model's theory without recompute (the block that block
// recompute runs again); `copy_bytes` the 16-bit copy's bytes per parameter.
void take_rank_part(ch07::MemoryTheory& t, const ch07::MemoryTheory& none, const RunConfig& config, int64_t batch,
                    int64_t seq, const comm::ParallelCoords& rank, int64_t copy_bytes) {
  const GPT2Config& m = config.model;
  const comm::ParallelLayout& layout = config.parallel.layout;
  const int tp = layout.tp, P = layout.pp, s = rank.pp;
  const int64_t C = m.n_embd, L = m.n_layer;
  // ModelShard::of_rank's even split of the blocks; the embeddings on the first stage, the head on the last.
  const int64_t blocks = (s + 1) * L / P - s * L / P;
  const bool embedding = s == 0, head = s == P - 1;
  const auto set = [&](MemCategory c, int64_t bytes) { t.bytes[static_cast<int>(c)] = bytes; };

  t.parameters = rank_parameters(m, tp, blocks, embedding, head);
  set(MemCategory::Params, t.parameters * (kFp32 + copy_bytes));
  set(MemCategory::Grads, t.parameters * kFp32);
  set(MemCategory::Optimizer, 2 * t.parameters * kFp32);  // AdamW's moments; the fp32 parameters are the masters

  const ch07::RecomputePolicy policy = config.rungs.recompute;
  const BlockActivations block = block_on_tp_rank(t, policy, C, tp);
  // Outside the blocks, per token: the first stage's embedding output (under tp the sum of the ranks' lookups; the
  // rank's own lookup is not kept), or the boundary activation another stage receives; on the last stage ln_f's
  // 2 statistics and the loss, and ln_f's output with the rank's logits (or, chunked, the gradient of ln_f's output
  // alone).
  int64_t outside = C;
  if (head) outside += 3 + (config.rungs.lm_head == ch07::LmHead::Chunked ? C : C + m.padded_vocab_for(tp) / tp);
  t.activation_elements_per_token_per_block = block.elements;
  t.attention_bytes_per_token_per_block = block.attention_bytes;
  t.activation_elements_per_token_outside = outside;
  t.activation_bytes_per_token = blocks * block.bytes() + outside * kFp32;
  set(MemCategory::Activations, micro_batches_in_flight(config, s) * batch * seq * t.activation_bytes_per_token);
  if (policy == ch07::RecomputePolicy::Block)
    t.recomputed_block_bytes = batch * seq * block_on_tp_rank(none, ch07::RecomputePolicy::None, C, tp).bytes();
}

}  // namespace

int64_t micro_batches_in_flight(const RunConfig& config, int stage) {
  const int P = config.parallel.layout.pp;
  if (P == 1) return 1;
  // The micro-batches whose forward has run and backward has not, at the stage's peak (ch08_distributed/pp/
  // schedule.h): GPipe runs every forward before the first backward; 1F1B runs P - stage - 1 warm-up forwards,
  // then one more before each backward. M is --micro-batches, which make_train_step holds the step's to.
  const int64_t M = config.parallel.micro_batches;
  return config.parallel.pp_schedule == ch08::PpSchedule::GPipe ? M : std::min<int64_t>(P - stage, M);
}

std::string run_memory_theory_scope(const RunConfig& config, const comm::ParallelCoords& rank) {
  const comm::ParallelLayout& layout = config.parallel.layout;
  if (layout.tp == 1 && layout.pp == 1) return "one micro-batch";
  const std::string shard = cat("its shard on tp rank ", rank.tp, " of ", layout.tp);
  if (layout.pp == 1) return cat(shard, ", one micro-batch");
  return cat(shard, " and stage ", rank.pp, " of ", layout.pp, ", ", micro_batches_in_flight(config, rank.pp), " of ",
             config.parallel.micro_batches, " micro-batches in flight (",
             ch08::pp_schedule_name(config.parallel.pp_schedule), ")");
}

ch07::MemoryTheory run_memory_theory(const RunConfig& config, int64_t batch, int64_t seq,
                                     const comm::ParallelCoords& rank) {
  const DType matmul = matmul_dtype(config.math);
  const DType activations = config.rungs.activations_16bit ? matmul : DType::F32;
  const int64_t copy_bytes = matmul == DType::F32 ? 0 : static_cast<int64_t>(dtype_size(matmul));  // per parameter
  const auto whole_model = [&](ch07::RecomputePolicy policy) {
    return ch07::memory_theory(config.model, batch, seq, policy, 4,
                               ch09::attention_kept(config.rungs.attention, matmul, activations),
                               static_cast<int64_t>(dtype_size(activations)), copy_bytes, config.rungs.lm_head);
  };
  ch07::MemoryTheory t = whole_model(config.rungs.recompute);
  const comm::ParallelLayout& layout = config.parallel.layout;
  if (layout.tp > 1 || layout.pp > 1)
    take_rank_part(t, whole_model(ch07::RecomputePolicy::None), config, batch, seq, rank, copy_bytes);
  const auto set = [&](MemCategory c, int64_t bytes) { t.bytes[static_cast<int>(c)] = bytes; };
  const MemoryStepOptions& memory = config.memory;
  if (memory.optimizer_in_backward) set(MemCategory::Grads, config.model.padded_vocab_for(1) * config.model.n_embd * 4);
  if (memory.offload_optimizer && config.device.is_cuda()) set(MemCategory::Optimizer, 0);
  if (memory.zero > 0) {
    const ch07::ZeroStateTheory zero = ch07::zero_state_theory(
        config.model, t.parameters,
        {memory.zero, config.parallel.layout.dp, config.parallel.bucket_bytes, memory.zero_prefetch});
    const auto bytes = [](double b) { return static_cast<int64_t>(std::llround(b)); };
    // The matmuls' 16-bit copy stays whole (stage 3, which would shard it, refuses 16-bit matmuls).
    set(MemCategory::Params,
        bytes(zero.params + zero.unit_gathered.bytes + zero.unit_prefetched.bytes) + copy_bytes * t.parameters);
    set(MemCategory::Grads, bytes(zero.grads + zero.grads_in_flight.bytes));
    set(MemCategory::Optimizer, bytes(zero.optimizer));
  }
  return t;
}

}  // namespace lab
