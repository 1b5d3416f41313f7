// What every ZeRO stage does after its update: each rank has updated only its shard of the parameters
// (shards.h), so the ranks all-gather the flat parameter buffer, bucket by bucket, and every rank again holds
// the whole model for the next forward pass. Together with the shard's moments: a sharded optimizer's
// moments gathered whole for a checkpoint (which stores the whole model's state, whatever the layout that
// wrote it), and this rank's shard taken from whole moments when a checkpoint is resumed.
#pragma once

#include <memory>

#include "ch07_memory/zero/shards.h"
#include "common/comm/communicator.h"
#include "common/optim/adamw.h"

namespace lab::ch07 {

// Collective over `group`, whose ranks are the shards' ranks.
void all_gather_parameters(comm::Communicator& group, const ZeroShards& shards, const ParameterStore& params);

// A whole-buffer AdamW over `params` holding the moments of every rank's `sharded` optimizer (and its step
// count), on every rank. Collective over `group`; the moments take 8 bytes per parameter while it lives.
std::unique_ptr<AdamW> gather_whole_optimizer(comm::Communicator& group, const AdamW& sharded, ParameterStore& params);
// Copies this rank's owned ranges of `whole`'s moments, and its step count, into `sharded`.
void load_optimizer_shard(const AdamW& whole, AdamW& sharded);

}  // namespace lab::ch07
