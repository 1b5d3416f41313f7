// Parsing --dtype once, and what the mode switches on the device (see math_mode.h).
#include "common/train/math_mode.h"

#include "common/core/error.h"

namespace lab {

MathMode parse_math_mode(const std::string& dtype) {
  for (const MathMode m : {MathMode::FP32, MathMode::TF32, MathMode::BF16, MathMode::FP16})
    if (dtype == bench::precision_name(m)) return m;
  fail(ErrorKind::InvalidArgument, "--dtype: '", dtype, "' is not one of fp32|tf32|bf16|fp16");
}

void apply_math_mode(Device device, MathMode mode) {
  if (mode == MathMode::TF32)
    set_tf32(device, true);
  else if (device.is_cuda())
    set_tf32(device, mode != MathMode::FP32);  // bf16, fp16: their fp32 products on TF32 (math_mode.h)
}

DType matmul_dtype(MathMode mode) {
  return mode == MathMode::BF16 ? DType::BF16 : mode == MathMode::FP16 ? DType::F16 : DType::F32;
}

void apply_math_mode(MathMode mode, TrainStep& step, const LossScalerConfig& scaling) {
  step.model().set_matmul_dtype(matmul_dtype(mode));
  step.set_loss_scaling(mode == MathMode::FP16 ? std::optional<LossScalerConfig>(scaling) : std::nullopt);
}

}  // namespace lab
