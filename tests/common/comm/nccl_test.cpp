// The NCCL tests' GPU, skip and communicator helpers (nccl_test.h).
#include "tests/common/comm/nccl_test.h"

#include "common/cuda/runtime.h"

namespace lab::testing {

bool every_rank_has_a_gpu() {
  Tensor without_gpu = Tensor::from_ints(std::vector<int32_t>{cuda::device_count() > 0 ? 0 : 1}, {1});
  mpi_world().all_reduce(without_gpu, comm::ReduceOp::Max);
  return without_gpu.to_ints()[0] == 0;
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
