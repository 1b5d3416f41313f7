// ZeRO's copies queued on the stream (see stream_copy.h).
#include "ch07_memory/zero/stream_copy.h"

#include "common/core/error.h"
#ifdef LAB_WITH_CUDA
#include "common/cuda/stream.h"
#endif

namespace lab::ch07 {

void copy_on_stream(const Tensor& dst, const Tensor& src) {
  LAB_CHECK(dst.numel() == src.numel() && dst.dtype() == src.dtype() && dst.device() == src.device(), InvalidArgument,
            "copy_on_stream: ", shape_str(src.shape()), " ", dtype_name(src.dtype()), " on ", src.device().str(),
            " into ", shape_str(dst.shape()), " ", dtype_name(dst.dtype()), " on ", dst.device().str());
#ifdef LAB_WITH_CUDA
  if (dst.device().is_cuda()) {
    cuda::copy_async(dst.raw(), dst.device(), src.raw(), src.device(), dst.nbytes());
    return;
  }
#endif
  dst.copy_from(src);
}

}  // namespace lab::ch07
