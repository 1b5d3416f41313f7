// Choosing the backend for a device's tensors: split, NCCL or the MPI fallback.
#include "common/comm/device_communicator.h"

#include <cstdio>

#include "common/comm/single_process.h"

#ifdef LAB_WITH_CUDA
#include "common/cuda/runtime.h"
#endif
#ifdef LAB_WITH_NCCL
#include "common/comm/mpi_communicator.h"
#include "common/comm/nccl_communicator.h"
#endif

namespace lab::comm {

std::unique_ptr<Communicator> communicator_for(Communicator& world, Device device) {
  if (device.is_cuda()) {
#ifdef LAB_WITH_CUDA
    cuda::check_device_index(device.index);
#else
    fail(ErrorKind::Unsupported, "no communicator for ", device.str(),
         ": this build has no CUDA (LAB_WITH_CUDA=OFF); use the cpu device");
#endif
  }
  if (world.size() == 1) {
    auto single = std::make_unique<SingleProcessCommunicator>();
    single->set_timeout(world.timeout());
    return single;
  }
  if (device.is_cpu()) return world.split(0, world.rank());
#ifdef LAB_WITH_NCCL
  if (auto* mpi = dynamic_cast<MpiCommunicator*>(&world)) {
    auto nccl = std::make_unique<NcclCommunicator>(*mpi, device);
    nccl->set_timeout(world.timeout());
    return nccl;
  }
  const char* why = "NCCL is bootstrapped over MPI, and the world is not an MPI communicator";
#else
  const char* why = "this build has no NCCL (LAB_WITH_NCCL=OFF)";
#endif
  if (world.rank() == 0)
    std::fprintf(stderr, "note: %s: %s tensors are communicated by the %s backend, staged through pinned host memory\n",
                 why, device.str().c_str(), world.backend().c_str());
  return world.split(0, world.rank());
}

}  // namespace lab::comm
