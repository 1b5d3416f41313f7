// What the NCCL backend's tests under mpirun share: the GPU of each rank, the skip when a rank sees none
// (every rank must skip together, or the others would wait for it), and a fresh NCCL communicator per test.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "common/comm/nccl_communicator.h"
#include "tests/common/comm/mpi_test.h"

namespace lab::testing {

// True when every rank of the job sees a GPU (collective over the world).
bool every_rank_has_a_gpu();

// This rank's GPU: cuda:(rank % GPUs), so that the ranks of one node use different GPUs, as NCCL wants.
Device rank_gpu();

// A new NCCL communicator over every rank of the world on rank_gpu(), with `timeout`. Collective.
std::unique_ptr<comm::NcclCommunicator> fresh_nccl_communicator(std::chrono::milliseconds timeout = kTestCommTimeout);

}  // namespace lab::testing

// Skips the test on every rank when any rank sees no GPU (the plain nvcc build on a machine without one).
#define LAB_REQUIRE_GPU_ON_EVERY_RANK()                                                                       \
  do {                                                                                                        \
    if (!::lab::testing::every_rank_has_a_gpu()) GTEST_SKIP() << "no CUDA GPU visible on some rank: skipped"; \
  } while (0)
