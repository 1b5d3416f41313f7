// main() of the tests that run under mpirun: starts the World, keeps the output readable (rank 0 prints
// as usual, every other rank prints only its failures, marked with its rank), and refuses to run as a
// single process, where these tests would prove nothing.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/comm/world.h"
#include "common/util/main.h"
#include "tests/common/comm/mpi_test.h"

namespace lab::testing {

namespace {

comm::Communicator* g_world = nullptr;

// The world's own timeout outlasts a test communicator's: a rank that a failed assertion sends ahead
// to the next test's split waits there until the others' operation has timed out.
constexpr std::chrono::seconds kWorldTimeout = 4 * kTestCommTimeout;

// The exit status of a job whose tests all skipped (cmake/lab_mpi.cmake: SKIP_RETURN_CODE).
constexpr int kEveryTestSkipped = 77;

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

comm::Communicator& mpi_world() {
  LAB_ASSERT(g_world != nullptr);
  return *g_world;
}

std::unique_ptr<comm::Communicator> fresh_communicator(std::chrono::milliseconds timeout) {
  std::unique_ptr<comm::Communicator> comm = mpi_world().split(0, mpi_world().rank());
  comm->set_timeout(timeout);
  return comm;
}

}  // namespace lab::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return lab::run_main(argc, argv, [](int, char** args) {
    lab::comm::World world(lab::testing::kWorldTimeout);
    const int rank = world.comm().rank();
    LAB_CHECK(world.comm().size() >= 2, InvalidArgument,
              "these tests run under mpirun with 2 or more ranks: mpirun -np ", "2 --oversubscribe ", args[0]);
    if (rank != 0) {
      ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new lab::testing::FailurePrinter(rank));
    }
    lab::testing::g_world = &world.comm();
    const int result = RUN_ALL_TESTS();
    lab::testing::g_world = nullptr;
    // A job whose every test skipped (CUDA tests without a GPU) says so to CTest (SKIP_RETURN_CODE).
    const ::testing::UnitTest& tests = *::testing::UnitTest::GetInstance();
    if (result == 0 && tests.test_to_run_count() > 0 && tests.skipped_test_count() == tests.test_to_run_count())
      return lab::testing::kEveryTestSkipped;
    return result;
  });
}
