// What the tests that run under mpirun share (see mpi_test_main.cpp and cmake/lab_mpi.cmake).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "common/comm/communicator.h"

namespace lab::testing {

// How long an operation of a test may wait for the other ranks before the test fails: long enough for 4
// ranks on 2 busy cores under sanitizers, short enough that a rank left behind by a failed assertion does
// not stall the job for long.
inline constexpr std::chrono::seconds kTestCommTimeout{30};

// The world communicator of the job (MPI, two or more ranks).
comm::Communicator& mpi_world();

// A new communicator over every rank of the world, with `timeout`: each test uses its own, so a test that
// breaks one (a timeout on purpose, or a failure) leaves the others working. Collective over the world.
std::unique_ptr<comm::Communicator> fresh_communicator(std::chrono::milliseconds timeout = kTestCommTimeout);

// Tests over parallel layouts (a Case has .layout, whose ranks() the job must have, and .name()): a case whose
// ranks are not the job's is skipped; the others get a fresh communicator over the world, world_.
template <typename Case>
class LayoutTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = this->GetParam();
    if (c.layout.ranks() != mpi_world().size()) GTEST_SKIP() << c.name() << " needs " << c.layout.ranks() << " ranks";
    world_ = fresh_communicator();
  }
  std::unique_ptr<comm::Communicator> world_;
};

}  // namespace lab::testing
