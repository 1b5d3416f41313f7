// What the NCCL backend's tests under mpirun share: the GPU of each rank, the skip when a rank sees none or
// when a node has fewer GPUs than ranks (NCCL wants one GPU per rank; every rank must skip together, or the
// others would wait for it), and a fresh NCCL communicator per test.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/comm/nccl_communicator.h"
#include "tests/common/comm/mpi_test.h"

namespace lab::testing {

// Why the job cannot give every rank a GPU of its own: a rank sees no GPU, or a node runs more ranks than
// it has GPUs. Empty when it can. Collective over the world; every rank gets the same answer.
std::string why_not_a_gpu_per_rank();

// This rank's GPU: cuda:(rank % GPUs), so that the ranks of one node use different GPUs, as NCCL wants.
Device rank_gpu();

// A new NCCL communicator over every rank of the world on rank_gpu(), with `timeout`. Collective.
std::unique_ptr<comm::NcclCommunicator> fresh_nccl_communicator(std::chrono::milliseconds timeout = kTestCommTimeout);

}  // namespace lab::testing

// Skips the test on every rank unless every rank has a GPU of its own (the plain nvcc build on a machine
// without a GPU, or with fewer GPUs than the job's ranks).
#define LAB_REQUIRE_GPU_ON_EVERY_RANK()                                                 \
  do {                                                                                  \
    if (const std::string why = ::lab::testing::why_not_a_gpu_per_rank(); !why.empty()) \
      GTEST_SKIP() << why << ": skipped";                                               \
  } while (0)
