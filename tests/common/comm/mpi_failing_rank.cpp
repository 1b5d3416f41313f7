// A program for test_mpi_launch: ranks under mpirun, of which rank 1 fails in the way the first argument
// names, just before an all-reduce that the other ranks wait in, so the test can see how the job ends.
//
//   mpi_failing_rank throw|kill|late|none TIMEOUT_MS
//
//   throw  rank 1 throws (a bad input file, say): it prints its error and exits non-zero, without
//          waiting in MPI_Finalize, and mpirun ends the others
//   kill   rank 1 dies by SIGKILL (the out-of-memory killer, say); mpirun ends the others
//   late   rank 1 sleeps for 30 s: the others' timeout fires first and ends the job
//   none   every rank calls the all-reduce and prints the result
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "common/comm/world.h"
#include "common/util/main.h"

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, [](int argc, char** argv) {
    LAB_CHECK(argc == 3, InvalidArgument, "usage: mpi_failing_rank throw|kill|late|none TIMEOUT_MS");
    const std::string how = argv[1];
    lab::comm::World world(std::chrono::milliseconds(std::stoi(argv[2])));
    lab::comm::Communicator& comm = world.comm();
    std::printf("rank %d/%d started (%s)\n", comm.rank(), comm.size(), comm.backend().c_str());
    std::fflush(stdout);
    if (comm.rank() == 1) {
      if (how == "throw") lab::fail(lab::ErrorKind::Io, "rank 1 could not read its data shard");
      if (how == "kill") std::raise(SIGKILL);
      if (how == "late") {
        std::this_thread::sleep_for(std::chrono::seconds(30));
        std::printf("rank 1 woke up\n");
      }
    }
    const lab::Tensor x = lab::Tensor::from_floats(std::vector<float>{static_cast<float>(comm.rank() + 1)}, {1});
    comm.all_reduce(x, lab::comm::ReduceOp::Sum);
    std::printf("rank %d: sum %g\n", comm.rank(), static_cast<double>(x.item()));
    return 0;
  });
}
