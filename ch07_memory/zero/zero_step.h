// ZeRO over the data-parallel ranks (Rajbhandari et al. 2020), the rungs that shard training state:
//
//   stage  sharded over the D ranks          per-rank bytes, fp32 AdamW (Ψ parameters)   file
//   0      nothing (data parallelism)        4Ψ + 4Ψ + 8Ψ = 16Ψ                           ch08 dp/
//   1      optimizer moments                 4Ψ + 4Ψ + 8Ψ/D                               stage1_optimizer_state.h
//   2      moments and gradients             4Ψ + 4Ψ/D + 8Ψ/D (+ a bucket in flight)      stage2_gradients.h
//   3      moments, gradients, parameters    16Ψ/D (+ the unit in use gathered)           stage3_parameters.h
//
// (The paper's 16Ψ is mixed-precision Adam: 2Ψ fp16 parameters, 2Ψ fp16 gradients, 12Ψ fp32 master weights and
// moments; with fp32 training the moments are 8Ψ and the parameters are their own master copy.) Every stage
// trains exactly as data parallelism does, up to the order of floating-point additions
// (tests/ch07_memory/zero); the shards are the buckets' per-rank blocks (shards.h). What each rank holds whole
// beside its shards at the peak, by name, is zero_theory.h's.
//
// Which stage is the right one: stage 1 costs one all-gather of the parameters per step beside data
// parallelism's all-reduce and saves most of the memory (the moments are half of fp32 training's state);
// stage 2 moves no more bytes than stage 1 (a reduce-scatter instead of the all-reduce) and also divides the
// gradients, but reduces every micro-batch's gradients (accumulation multiplies its traffic); stage 3 also
// divides the parameters, for half as much traffic again (each block gathered for its forward and its
// backward), and is the one that lets a model too large for one GPU's memory train at all. With one rank
// nothing is saved.
#pragma once

#include <memory>

#include "ch07_memory/zero/shards.h"
#include "common/comm/communicator.h"
#include "common/dist/dp_stage.h"
#include "common/train/train_step.h"

namespace lab::ch07 {

// The shards a stage cuts: buckets of `bucket_bytes` for stages 1 and 2, ZeroShards::per_block for stage 3.
ZeroShards zero_shards(int stage, const ParameterStore& params, int ranks, int rank, int64_t bucket_bytes);

// The step of ZeRO stage `stage` (1, 2 or 3; InvalidArgument otherwise) over `group`, the data-parallel ranks.
// `shards` must be zero_shards(stage, ...)'s and `optimizer` built with shards.owned(); stage 1 averages the
// gradients with the data-parallel `dp_stage`'s reducer; `prefetch` is stage 3's (block_prefetcher.h;
// InvalidArgument for the other stages). Collective over `group`.
std::unique_ptr<TrainStep> make_zero_step(int stage, comm::Communicator& group, const ZeroShards& shards,
                                          dist::DpStage dp_stage, GPT2& model, AdamW& optimizer, TrainStepConfig config,
                                          bool prefetch = false);

// InvalidArgument unless `shards` are the shards of `group` and `optimizer` owns exactly them.
void check_sharding(const comm::Communicator& group, const ZeroShards& shards, const AdamW& optimizer);

}  // namespace lab::ch07
