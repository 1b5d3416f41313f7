// Choosing the backend for a device's tensors: split, NCCL or the MPI fallback.
#include "common/comm/device_communicator.h"

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/comm/single_process.h"

#ifdef LAB_WITH_CUDA
#include "common/cuda/runtime.h"
#endif
#ifdef LAB_WITH_NCCL
#include "common/comm/mpi_communicator.h"
#include "common/comm/nccl_communicator.h"
#endif

namespace lab::comm {

#ifdef LAB_WITH_NCCL
namespace {

// NCCL wants one GPU per rank, and finds out only deep inside ncclCommInitRank ("Duplicate GPU detected").
// Say it first, and in the program's terms: which ranks share a GPU, how many ranks this node runs and how
// many GPUs it has, and what to do. Ranks compare (host, PCI location) so that CUDA_VISIBLE_DEVICES, which
// renumbers the GPUs of each process, is taken into account. Collective over `world`; every rank fails alike.
void check_one_gpu_per_rank(Communicator& world, Device device) {
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof(name) - 1);
  const auto host = static_cast<int32_t>(std::hash<std::string>{}(name)&0x7fffffff);
  const cuda::PciLocation pci = cuda::pci_location(device.index);
  constexpr int64_t kInts = 5;
  const std::vector<int32_t> identity{host, pci.domain, pci.bus, pci.device, device.index};
  const Tensor mine = Tensor::from_ints(identity, {kInts});
  const Tensor all = Tensor::zeros({kInts * world.size()}, DType::I32);
  world.all_gather(mine, all);
  const std::vector<int32_t> v = all.to_ints();
  const auto at = [&](int rank, int field) { return v[static_cast<size_t>(rank * kInts + field)]; };
  const auto same_gpu = [&](int a, int b) {
    for (int field = 0; field < 4; ++field)
      if (at(a, field) != at(b, field)) return false;
    return true;
  };
  for (int r = 0; r < world.size(); ++r)
    for (int q = 0; q < r; ++q) {
      if (!same_gpu(q, r)) continue;
      int on_node = 0;
      for (int k = 0; k < world.size(); ++k) on_node += at(k, 0) == at(r, 0) ? 1 : 0;
      const int gpus = cuda::device_count();
      fail(ErrorKind::InvalidArgument, "ranks ", q, " and ", r, " would share one GPU (cuda:", at(q, 4), " of rank ", q,
           "), but NCCL needs a GPU of its own for every rank: ", on_node, " ranks run on one node, which shows ", gpus,
           gpus == 1 ? " GPU" : " GPUs", " to each of them. Run at most ", gpus, gpus == 1 ? " rank" : " ranks",
           " per node, or use --device cpu, or give each rank its own GPU (CUDA_VISIBLE_DEVICES)");
    }
}

}  // namespace
#endif

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
    check_one_gpu_per_rank(world, device);
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
