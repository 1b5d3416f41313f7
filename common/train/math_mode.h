// The math precision of a training run, parsed once from --dtype:
//
//   fp32  plain fp32 everywhere
//   tf32  fp32 storage; the GPU's fp32 matrix products on TF32 tensor cores (10-bit mantissa inputs, fp32
//         accumulation); CUDA only
//   bf16  mixed precision: every linear layer's product reads bf16 operands (inputs, weights, output gradients) and
//         accumulates in fp32; everything else and the master weights fp32 (chapter 6; GPT2::set_matmul_dtype).
//         On a GPU the fp32 products left (the materialized attention's, which computes in fp32) run on TF32, as
//         in tf32: TF32 keeps 10 mantissa bits where bf16 keeps 7, so they lose less than the mode already gives
//         up, and they leave the CUDA cores' FMAs for the tensor cores (strict fp32 there made the bf16 step
//         slower than the tf32 one: 48% of its kernel time on an H100, docs/gpu.md)
//   fp16  the same in fp16 (TF32 likewise), with dynamic loss scaling (common/train/loss_scaler.h)
//
// These are the four precisions of the GPU peak table, whose peak is the one model-FLOPs utilisation divides
// by, so the math mode is that enum: bench::gpu_peak_flops(name, mode) gives the right peak directly.
#pragma once

#include <string>

#include "common/bench/gpu_peaks.h"
#include "common/core/device.h"
#include "common/train/train_step.h"

namespace lab {

using MathMode = bench::Precision;

// "fp32" | "tf32" | "bf16" | "fp16" -> the mode; Error(InvalidArgument) naming --dtype for anything else.
MathMode parse_math_mode(const std::string& dtype);

// The storage of the mode's matrix-product operands: bf16, f16, or f32 (fp32 and tf32).
DType matmul_dtype(MathMode mode);

// Sets what the mode means for `device`'s fp32 matrix products: TF32 on for tf32 (Error(Unsupported) on the CPU,
// which has no TF32), bf16 and fp16 on a GPU, off for fp32 on a GPU (TF32 is per device and outlives a run, so a
// later fp32 run in the same process must switch it off). Nothing on the CPU otherwise.
void apply_math_mode(Device device, MathMode mode);

// What the mode means for a training step and its model: bf16 and fp16 give the model 16-bit matrix products
// (GPT2::set_matmul_dtype, which copies the weights: call it once they are set), fp16 also dynamic loss scaling
// with `scaling`; fp32 and tf32 fp32 products and no scaling.
void apply_math_mode(MathMode mode, TrainStep& step, const LossScalerConfig& scaling = {});

}  // namespace lab
