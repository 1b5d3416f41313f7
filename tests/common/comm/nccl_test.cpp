// The NCCL tests' GPU, skip and communicator helpers (nccl_test.h).
#include "tests/common/comm/nccl_test.h"

#include <unistd.h>

#include <climits>
#include <functional>
#include <vector>

#include "common/core/error.h"
#include "common/cuda/runtime.h"

namespace lab::testing {

std::string why_not_a_gpu_per_rank() {
  comm::Communicator& world = mpi_world();
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof(name) - 1);
  const std::vector<int32_t> mine{static_cast<int32_t>(std::hash<std::string>{}(name)&0x7fffffff),
                                  cuda::device_count()};
  const Tensor all = Tensor::zeros({2 * world.size()}, DType::I32);
  world.all_gather(Tensor::from_ints(mine, {2}), all);
  const std::vector<int32_t> v = all.to_ints();
  for (int r = 0; r < world.size(); ++r) {
    const int32_t host = v[static_cast<size_t>(2 * r)], gpus = v[static_cast<size_t>(2 * r + 1)];
    if (gpus == 0) return cat("no CUDA GPU visible on rank ", r);
    int on_node = 0;
    for (int k = 0; k < world.size(); ++k) on_node += v[static_cast<size_t>(2 * k)] == host ? 1 : 0;
    if (on_node > gpus)
      return cat("needs a GPU per rank (NCCL refuses two ranks on one GPU): ", on_node, " ranks on one node, ", gpus,
                 gpus == 1 ? " GPU" : " GPUs", " visible");
  }
  return "";
}

Device rank_gpu() {
  return Device::cuda(mpi_world().rank() % cuda::device_count());
}

std::unique_ptr<comm::NcclCommunicator> fresh_nccl_communicator(std::chrono::milliseconds timeout) {
  auto comm = std::make_unique<comm::NcclCommunicator>(dynamic_cast<comm::MpiCommunicator&>(mpi_world()), rank_gpu());
  comm->set_timeout(timeout);
  return comm;
}

}  // namespace lab::testing
