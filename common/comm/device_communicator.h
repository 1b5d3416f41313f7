// The communicator a program uses for the tensors of one device, over the ranks of its world:
//
//   lab::comm::World world;
//   auto comm = lab::comm::communicator_for(world.comm(), Device::cuda(rank % gpus));
//
//   world                device  communicator
//   one rank             any     the single-process communicator (nothing to communicate)
//   MPI                  cpu     a split of the world
//   MPI, LAB_WITH_NCCL   cuda    NCCL on that GPU, bootstrapped over the world's MPI communicator
//   MPI, no NCCL         cuda    the MPI backend, which stages CUDA tensors through pinned host memory;
//                                rank 0 says so on stderr, since it is much slower than NCCL on a GPU
//
// Each rank passes its own GPU; NCCL wants a different GPU for every rank of a node, and two ranks on one
// GPU are refused before NCCL starts, with a line that says how many GPUs the node has and what to do.
#pragma once

#include <memory>

#include "common/comm/communicator.h"
#include "common/core/device.h"

namespace lab::comm {

// A new communicator over the ranks of `world` for tensors on `device` (see above), with the world's
// timeout. Collective over `world`. Error(Unsupported) for a CUDA device in a build without CUDA,
// InvalidArgument for a GPU that is not visible, or (NCCL) for a GPU that another rank uses too.
std::unique_ptr<Communicator> communicator_for(Communicator& world, Device device);

}  // namespace lab::comm
