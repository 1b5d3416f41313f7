// The world of a program: all the processes of the job and the communicator that spans them, the one
// place where MPI is started and stopped. Every distributed program begins with it:
//
//   int main(int argc, char** argv) {
//     return lab::run_main(argc, argv, [](int argc, char** argv) {
//       lab::comm::World world;                      // inside run_main's body: see ~World
//       lab::comm::Communicator& comm = world.comm();
//       ...
//     });
//   }
//
// Under mpirun (in a build with MPI) the world is an MPI communicator over every rank; started any
// other way, the program is one rank with the single-process communicator, and MPI is never touched.
#pragma once

#include <chrono>
#include <memory>

#include "common/comm/communicator.h"

namespace lab::comm {

// How long a program's collectives wait for the other ranks by default; a program may take another from a
// flag (--comm-timeout) and pass it to World or to comm().set_timeout().
inline constexpr std::chrono::seconds kProgramCommTimeout{300};

class World {
 public:
  // Error(Unsupported) when mpirun started this process but the build has no MPI; Error(Comm) when MPI
  // fails to start.
  explicit World(std::chrono::milliseconds timeout = kProgramCommTimeout);
  // Finalises MPI, except while an exception is unwinding the stack: the process then ends without
  // waiting in MPI_Finalize for ranks that may themselves be waiting for it, and mpirun stops the job.
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  Communicator& comm() const;

 private:
  struct State;  // the MPI runtime (when there is one) and the world communicator
  std::unique_ptr<State> state_;
};

}  // namespace lab::comm
