// The checks of a backend's operations that the tests of every backend under mpirun share (MPI with CPU
// and CUDA tensors, NCCL): each runs on a communicator of the job and tensors on `device`, with fresh
// inputs whose results every rank computes by itself (mpi_test_data.h), and reports through GoogleTest.
#pragma once

#include <cstdint>
#include <vector>

#include "common/comm/communicator.h"
#include "common/core/device.h"

namespace lab::testing {

// Every collective, dtype and reduction, in place and out of place, at zero, one, odd and larger sizes.
void check_all_reduce(comm::Communicator& comm, Device device);
void check_reduce_scatter(comm::Communicator& comm, Device device);
void check_all_gather(comm::Communicator& comm, Device device);
void check_broadcast(comm::Communicator& comm, Device device);

// Arbitrary floats do not sum exactly: an all-reduce of normal random values in each floating dtype must
// be within (ranks) roundings of the exact sum, relative to the sum of magnitudes.
void check_all_reduce_of_random_floats(comm::Communicator& comm, Device device);

// The traffic counters after one call of each kind (a send from rank 0 to rank 1 among them).
void check_traffic_counts(comm::Communicator& comm, Device device);

// Each rank sends to the next and receives from the previous one around the ring, every dtype, sizes from
// 0 to `largest` elements.
void check_ring_exchange(comm::Communicator& comm, Device device, int64_t largest);

// The world ranks of the members of `group`, in group-rank order (gathered over the group, on `device`).
// `world_rank` is this rank's rank in the world.
std::vector<int32_t> members(comm::Communicator& group, int world_rank, Device device = Device::cpu());

}  // namespace lab::testing
