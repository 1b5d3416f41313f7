// The few things the ranks of a job agree on besides gradients: the lines rank 0 prints about every rank, the
// mean of a number over a group (the logged loss of the global batch), and when to stop.
#pragma once

#include <string>
#include <vector>

#include "common/comm/communicator.h"
#include "common/core/device.h"

namespace lab::dist {

// Every rank's `line`, in rank order, on every rank (lines are cut at 255 bytes). Collective over `comm`.
std::vector<std::string> gather_lines(comm::Communicator& comm, const std::string& line);

// The mean over the ranks of `comm` of each rank's `value`, through a tensor on `device` (the device
// `comm` communicates for). Collective; `value` itself with one rank.
double mean_over(comm::Communicator& comm, double value, Device device);

// The stop request of the job: the largest of the ranks' signal numbers (0: none), so that one rank's signal
// stops every rank before the same step. Collective over `world` (CPU tensors).
int agree_on_stop(comm::Communicator& world, int local_signal);

}  // namespace lab::dist
