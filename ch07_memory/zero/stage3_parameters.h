// ZeRO stage 3 (`--zero 3`): the parameters are sharded too.
//
// What changes from stage 2 (stage2_gradients.h): no rank keeps the whole model. Each rank keeps its shard of
// the parameters beside its shards of the gradients and moments, and the model's flat parameter buffer is
// released (ParameterStore::release_flat_params). The shards are cut per unit (ZeroShards::per_block): each
// transformer block is one unit, and a block's weights exist whole only while it runs:
//   - forward: the block's unit is all-gathered just before the block and released after it;
//   - backward: gathered again just before the block's backward and released after it, once its gradients
//     have been reduce-scattered (stage 2's gradient hooks). Two steps recorded on the tape around the block
//     do that: one after its last op (the backward runs it first) and one before its first op (run last).
// Functions read a parameter's value when they run (Var::bind_value), so the tape's steps see the weights
// gathered again in backward. The other units, the embeddings and the final LayerNorm (FSDP's "root"), stay
// whole: GPT-2 uses wte at both ends of the pass (the tied LM head), and FSDP keeps its root unit gathered
// through forward and backward too; here it also stays gathered between steps, all-gathered again after each
// update. The model's options().block hook does the gathering, around the hook that was there before (block
// recompute, if any), so evaluation and sampling gather each block as training does.
//
// Per-rank bytes with fp32 AdamW and Ψ parameters, Ψ_root of them in the root: 16Ψ/D for the shards, plus
// 4Ψ_root for the whole root, plus one block's weights while it runs (with its gradients and the
// reduce-scatter's buffer during its backward). What it costs: every block's weights are all-gathered twice per
// micro-batch (forward and backward), 2Ψ_blocks elements received per micro-batch on top of stage 2's
// reduce-scatter; the gathers run on the training thread, not overlapped with compute, unless prefetch
// (`--zero-prefetch`, block_prefetcher.h) gathers the next block on a second communicator while the current one
// computes. When not to use it: when the parameters fit; stage 2 moves about two thirds of the bytes (2Ψ per
// step against 3Ψ).
//
// Training is unchanged: the same ops on the same values in the same order as stage 2, so the losses, norms and
// weights are data parallelism's up to the order of floating-point additions (tests/ch07_memory/zero). Mixed
// precision's 16-bit weight copy is not sharded: stage 3 trains in fp32 (or tf32).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ch07_memory/zero/block_prefetcher.h"
#include "ch07_memory/zero/stage2_gradients.h"

namespace lab::ch07 {

class ZeroStage3Step : public ZeroStage2Step {
 public:
  // `shards` must be ZeroShards::per_block's for the group, `optimizer` sharded as they say. Takes this rank's
  // shard of the model's parameters as they are now (load or initialise weights before) and releases the flat
  // buffer for good; installs the gathering block hook in model.options(). With `prefetch`, the next block's
  // gather overlaps the current block (block_prefetcher.h; collective then: it splits the group).
  ZeroStage3Step(comm::Communicator& group, const ZeroShards& shards, GPT2& model, AdamW& optimizer,
                 TrainStepConfig config, bool prefetch = false);
  // Puts the previous block hook back. The model's parameters stay sharded: gather them first to keep them.
  ~ZeroStage3Step() override;

  // Runs `use` with the whole model's parameters gathered into a flat buffer again (params() defined, every
  // value bound to it: a checkpoint's save, a comparison), then shards them again. Collective over the group.
  void with_whole_model(const std::function<void()>& use);

  // This rank's shard of the parameters, laid out as the optimizer's moments.
  const Tensor& parameter_shard() const { return parameter_shard_; }

 protected:
  void optimizer_step(double lr, float clip_coefficient) override;

 private:
  struct Unit {
    bool root = false;      // kept whole (not a transformer block)
    std::vector<Var> vars;  // its parameters, in the bucket's order
    Tensor whole;           // the gathered unit, padded to a multiple of the ranks; undefined while released
    // The units of the blocks that run after this one's in forward and in backward (kNone: none).
    size_t next_in_forward = kNone, next_in_backward = kNone;
  };
  static constexpr size_t kNone = static_cast<size_t>(-1);
  Var gathered_block(Tape& tape, const Block& block, const Var& x, const ModelOptions& options);
  size_t unit_of(const Block& block) const;
  // A zeroed buffer of unit u padded to a multiple of the ranks, counted as `category`.
  Tensor padded_unit(size_t u, MemCategory category) const;
  // Copies this rank's part of unit u from its parameter shard into its block of `into` (the padded unit).
  void copy_own_part(size_t u, const Tensor& into) const;
  // The same, then all-gathers the other ranks' parts into `into`.
  void all_gather_unit(size_t u, const Tensor& into);
  // Binds the values of unit u's parameters to their places in `whole` (the padded unit), or unbinds them.
  void bind_unit(size_t u, const Tensor& whole);
  void gather(size_t u);
  // With prefetch, starts gathering unit u (kNone: nothing) on the prefetcher.
  void prefetch(size_t u);
  void release(size_t u);
  void bind_root_units();

  Tensor parameter_shard_;
  std::vector<Unit> units_;  // per bucket of the shards
  ModelOptions::BlockFn previous_block_;
  std::unique_ptr<BlockPrefetcher> prefetcher_;  // with prefetch only
};

}  // namespace lab::ch07
