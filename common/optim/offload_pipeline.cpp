// The chunked offloaded step: transfers on a copy stream, the update on the CPU (see offload_pipeline.h).
#include "common/optim/offload_pipeline.h"

#include <algorithm>

#include "common/core/error.h"
#ifdef LAB_WITH_CUDA
#include "common/cuda/check.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"
#endif

namespace lab {

#ifdef LAB_WITH_CUDA
struct OffloadPipeline::Streams {
  explicit Streams(int device, size_t chunks) : copy(device), after_backward(false), up(false) {
    for (size_t k = 0; k < chunks; ++k) down.push_back(std::make_unique<cuda::Event>(false));
  }
  cuda::Stream copy;
  cuda::Event after_backward, up;
  std::vector<std::unique_ptr<cuda::Event>> down;  // per chunk: its gradients are in host memory
};
#else
struct OffloadPipeline::Streams {};
#endif

OffloadPipeline::OffloadPipeline(Device device, int64_t numel, int64_t chunk_elements) {
  LAB_CHECK(chunk_elements > 0, InvalidArgument, "offload chunks of ", chunk_elements, " elements");
  LAB_CHECK(device.is_cuda(), InvalidArgument, "the offload pipeline moves state between a GPU and the host, not ",
            device.str());
  for (int64_t begin = 0; begin < numel; begin += chunk_elements)
    ranges_.push_back({begin, std::min(begin + chunk_elements, numel)});
#ifdef LAB_WITH_CUDA
  cuda::DeviceGuard on(device.index);
  streams_ = std::make_unique<Streams>(device.index, ranges_.size());
#else
  fail(ErrorKind::Unsupported, "optimizer state in pinned host memory needs the CUDA backend");
#endif
}

OffloadPipeline::~OffloadPipeline() = default;

void OffloadPipeline::step(const Tensor& params, const Tensor& grads, const Tensor& master, const Tensor& host_grads,
                           const std::function<void(const ElementRange&)>& update) {
#ifdef LAB_WITH_CUDA
  const Device gpu = params.device();
  cuda::DeviceGuard on(gpu.index);
  const auto view = [](const Tensor& t, const ElementRange& r) { return t.view(r.begin, {r.size()}); };
  const auto bytes = [](const ElementRange& r) { return static_cast<size_t>(r.size()) * sizeof(float); };
  Streams& s = *streams_;
  s.after_backward.record();  // on the compute stream: the gradients are written once it is passed
  {
    const cuda::StreamGuard on_copy(s.copy);
    s.copy.wait(s.after_backward);
    for (size_t k = 0; k < ranges_.size(); ++k) {
      cuda::copy_async(view(host_grads, ranges_[k]).data<float>(), Device::cpu(), view(grads, ranges_[k]).data<float>(),
                       gpu, bytes(ranges_[k]));
      s.down[k]->record(s.copy);
    }
  }
  for (size_t k = 0; k < ranges_.size(); ++k) {
    s.down[k]->synchronize();
    update(ranges_[k]);
    const cuda::StreamGuard on_copy(s.copy);
    cuda::copy_async(view(params, ranges_[k]).data<float>(), gpu, view(master, ranges_[k]).data<float>(), Device::cpu(),
                     bytes(ranges_[k]));
  }
  s.up.record(s.copy);
  CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(gpu.index), s.up.get(), 0));  // no host sync
#else
  (void)params, (void)grads, (void)master, (void)host_grads, (void)update;
#endif
}

}  // namespace lab
