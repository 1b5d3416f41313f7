#include "common/ops/convert.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

void convert(const Tensor& dst, const Tensor& src) {
  const auto is_16bit = [](DType t) { return t == DType::BF16 || t == DType::F16; };
  LAB_CHECK(
      (dst.dtype() == DType::F32 && is_16bit(src.dtype())) || (src.dtype() == DType::F32 && is_16bit(dst.dtype())),
      InvalidArgument, "convert: ", dtype_name(src.dtype()), " -> ", dtype_name(dst.dtype()),
      " is not between f32 and bf16/f16");
  LAB_CHECK(dst.numel() == src.numel(), InvalidArgument, "convert: ", shape_str(src.shape()), " into ",
            shape_str(dst.shape()), " (element counts differ)");
  check_same_device({&dst, &src}, "convert");
  LAB_DISPATCH(dst.device(), convert, dst, src);
}

}  // namespace lab::ops
