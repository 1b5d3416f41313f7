// Training checkpoints: a directory written atomically (see AtomicDirectory) holding
//   model.safetensors      the weights, Hugging Face GPT-2 names (loadable with --init as well)
//   optimizer.safetensors  AdamW's moments per parameter, "m.<name>" and "v.<name>" with the parameter's shape
//                          (wte's with the real vocabulary only, as in model.safetensors), so that the state does
//                          not depend on how the optimizer lays out its buffers in memory (the parameter layout,
//                          a parallel layout's shards). Version 1 files, which held the two flat buffers of the
//                          whole model in the decay-first layout ("adamw.m", "adamw.v"), are still read.
//   state.json             step, data position, sampler RNG, model config, run settings, parallel layout, and
//                          fp16's loss scaler (absent without loss scaling and in older checkpoints)
//   .lab-directory         AtomicDirectory's marker: "gpt2-labs checkpoint" and the names above
// Resuming from it continues bit for bit where the uninterrupted run would have been (CPU, same flags).
// A checkpoint replaces only an earlier checkpoint (recognised by its marker) or nothing: never a user's files.
//
// The files hold the whole model whatever the layout that wrote them: a parallel run gathers the whole tensors
// from its shards to rank 0, which writes (ch08_distributed/tp/whole_tensors.h), and any layout resumes any
// checkpoint, each rank loading its slice of each tensor (a tp run resumes in one process and the reverse).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/comm/parallel_context.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/loss_scaler.h"
#include "common/util/json.h"

namespace lab {

struct TrainState {
  int64_t step = 0;               // optimizer steps completed
  int64_t loader_position = 0;    // training batches consumed
  std::array<uint64_t, 4> rng{};  // the sampler's generator
  GPT2Config config;
  Json options = Json::object();  // TrainOptions::to_json() of the run
  comm::ParallelLayout parallel;  // the layout of the run that wrote it (any layout may resume it: trainer.h)
  std::optional<LossScalerState> loss_scaler;  // fp16's dynamic loss scaling; none without it
};

// The kind AtomicDirectory records in a checkpoint's marker.
inline constexpr const char* kCheckpointKind = "gpt2-labs checkpoint";

// Before training: refuses (Error(Io)) a destination that holds anything but an earlier checkpoint, cleans the
// leftovers of an interrupted save, and checks that the directory can be written. Returns a line per thing
// cleaned, to be printed.
std::vector<std::string> prepare_checkpoint_destination(const std::string& dir);

// Writes the checkpoint of a whole model (`context` null), or of a parallel run: every rank of `context` calls it
// with its shard, and world rank 0 writes.
void save_checkpoint(const std::string& dir, const GPT2& model, const AdamW& optimizer, const TrainState& state,
                     const comm::ParallelContext* context = nullptr);

// Reads state.json (recovering from an interrupted commit first). Error(Io) when `dir` is missing or is not a
// directory, Error(Format) naming the file when its contents are wrong.
TrainState read_checkpoint_state(const std::string& dir);
// Loads weights and optimizer moments into a model built with read_checkpoint_state(dir).config: the whole model
// or any shard of it (its slice of each tensor).
void load_checkpoint(const std::string& dir, GPT2& model, AdamW& optimizer);

}  // namespace lab
