// Deciding between an MPI world and a single-process one, from the launcher's environment.
#include "common/comm/world.h"

#include <cstdlib>
#include <string>

#include "common/comm/single_process.h"
#ifdef LAB_WITH_MPI
#include "common/comm/mpi_communicator.h"
#include "common/comm/mpi_runtime.h"
#endif

namespace lab::comm {

namespace {

// How many ranks an MPI launcher started this process among, read from the variables it sets: Open MPI's
// mpirun OMPI_COMM_WORLD_SIZE, MPICH's Hydra and Slurm's PMI PMI_SIZE; PMIx launchers set PMIX_RANK and
// leave the size to MPI (-1 here). 0 when no launcher started this process. Looking, rather than calling
// MPI_Init to find out, spares a plain run Open MPI's "singleton" start-up (0.44 s measured here).
int launched_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return std::getenv("PMIX_RANK") ? -1 : 0;
}

}  // namespace

struct World::State {
#ifdef LAB_WITH_MPI
  std::unique_ptr<MpiRuntime> mpi;  // declared first, so destroyed after the communicator
#endif
  std::unique_ptr<Communicator> comm;
};

World::World(std::chrono::milliseconds timeout) : state_(std::make_unique<State>()) {
  const int launched = launched_ranks();
#ifdef LAB_WITH_MPI
  if (launched != 0) {
    state_->mpi = std::make_unique<MpiRuntime>();
    MPI_Comm world = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world));  // our own context: no clash with other MPI users
    state_->comm = std::make_unique<MpiCommunicator>(world);
  }
#else
  LAB_CHECK(launched == 0 || launched == 1, Unsupported, "this program was started by an MPI launcher",
            launched > 1 ? cat(" with ", launched, " ranks") : std::string(),
            ", but it was built without MPI (LAB_WITH_MPI=OFF): install Open MPI and reconfigure");
#endif
  if (!state_->comm) state_->comm = std::make_unique<SingleProcessCommunicator>();
  state_->comm->set_timeout(timeout);
}

World::~World() = default;

Communicator& World::comm() const {
  return *state_->comm;
}

}  // namespace lab::comm
