// ZeRO stage 3 (`--zero 3`): the parameters are sharded too.
//
// What changes from stage 2 (stage2_gradients.h): no rank keeps the whole model. Each rank keeps its shard of
// the parameters beside its shards of the gradients and moments, and the model's flat parameter buffer is
// released (ParameterStore::release_flat_params). The shards are cut per unit (ZeroShards::per_block): each
// transformer block is one unit, and so is each parameter outside the blocks (wte, wpe, ln_f's weight and bias:
// FSDP's "root", which it shards and reshards after use too). A unit's weights exist whole only while it is used:
//   - a block: all-gathered just before it runs forward and released after it; gathered again just before its
//     backward and released after it, once its gradients have been reduce-scattered (stage 2's gradient hooks);
//   - the embedding lookup: wte and wpe gathered for its forward and released after; its backward reads no
//     weight (it adds rows of the output's gradient into the embeddings'), so nothing is gathered for it;
//   - the head (ln_f, then the LM head tied to wte): ln_f and wte gathered for its forward and released after,
//     gathered again for its backward (which reads wte) and released after it.
// wte's gradient is reduced chunk by chunk by stage 2's LM head and lookup (tied_embedding_gradient.h).
// Nothing stays gathered between steps. Steps recorded on the tape around each use do that in backward: one
// after its last op (the backward runs it first: gather) and one before its first op (run last: release).
// Functions read a parameter's value when they run (Var::bind_value), so the tape's steps see the weights
// gathered again in backward. The model's options().block and options().root hooks do the gathering, around
// the hooks that were there before (block recompute, stage 2's), so evaluation and sampling gather each unit as
// training does.
//
// Per-rank bytes with fp32 AdamW and Ψ parameters: 16Ψ/D for the shards, plus the largest unit's weights while
// it is used (GPT-2's wte with wpe for the lookup, a third of d12; a block for small vocabularies), plus the
// gradients in flight (a block's during its backward, a chunk of wte's of at most a block), and with prefetch
// the unit gathered ahead (zero_theory.h). What it costs: every unit's weights are all-gathered twice per
// micro-batch (wte three times: the lookup, the head and its backward; wpe once), about 2Ψ elements received
// per micro-batch on top of stage 2's reduce-scatter; the gathers run on the training thread, not overlapped
// with compute, unless prefetch (`--zero-prefetch`, block_prefetcher.h) gathers the unit that runs next on a
// second communicator while the current one computes (forward: the lookup, the blocks in order, the head;
// backward: the head, the blocks in reverse). When not to use it: when the parameters fit; stage 2 moves about
// two thirds of the bytes (2Ψ per step against 3Ψ).
//
// Training is unchanged: the same ops on the same values in the same order as stage 2, so the losses, norms and
// weights are data parallelism's up to the order of floating-point additions (tests/ch07_memory/zero). Mixed
// precision's 16-bit weight copy is not sharded: stage 3 trains in fp32 (or tf32).
#pragma once

#include <functional>
#include <memory>
#include <string>
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
  // Puts the previous block and root hooks back. The model's parameters stay sharded: gather them first to keep
  // them.
  ~ZeroStage3Step() override;

  // Runs `use` with the whole model's parameters gathered into a flat buffer again (params() defined, every
  // value bound to it: a checkpoint's save, a comparison), then shards them again. Collective over the group.
  void with_whole_model(const std::function<void()>& use);

  // Captured in a CUDA graph, the gathers are queued on the step's stream like stage 2's reduce-scatters (each
  // unit's buffer from the graph's pool, this rank's part copied in on the stream, the all-gather queued), and
  // released units' buffers return to the pool for the next unit, in the same order at every replay. Prefetch
  // gathers from a thread, which a capture cannot follow: refused.
  std::string capture_blocker() const override;

 protected:
  void optimizer_step(double lr) override;

 private:
  struct Unit {
    std::vector<Var> vars;  // its parameters, in the bucket's order
    Tensor whole;           // the gathered unit, padded to a multiple of the ranks; undefined while released
    // The unit whose use comes after this one's in forward and in backward (kNone: none), prefetched.
    size_t next_in_forward = kNone, next_in_backward = kNone;
  };
  // The units used together outside the blocks, and which unit's use comes after theirs.
  struct RootUse {
    std::vector<size_t> units;
    size_t next_in_forward = kNone, next_in_backward = kNone;
  };
  Var gathered_block(Tape& tape, const Block& block, const Var& x, const ModelOptions& options);
  Var gathered_root(Tape& tape, ModelOptions::RootPart part, const std::function<Var()>& compute);
  size_t unit_of(const Block& block) const;
  // The unit of the parameter named `name`, kNone when the model has none.
  size_t unit_named(const std::string& name);
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
  // Gives wpe's gradient its shape (zeros) for the lookup's backward, its weights released (wte's gradient is
  // never whole: tied_embedding_gradient.h).
  void bind_lookup_gradients();

  Tensor parameter_shard_;   // this rank's shard of the parameters, laid out as the optimizer's moments
  std::vector<Unit> units_;  // per bucket of the shards
  RootUse lookup_, head_;    // the embedding lookup (wte, wpe); the head (wte, ln_f's weight and bias)
  ModelOptions::BlockFn previous_block_;
  ModelOptions::RootFn previous_root_;           // stage 2's, wrapped
  std::unique_ptr<BlockPrefetcher> prefetcher_;  // with prefetch only
};

}  // namespace lab::ch07
