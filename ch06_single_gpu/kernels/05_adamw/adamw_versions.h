// The AdamW lab's versions that work on a list of parameter tensors (the model as most frameworks hold it),
// before the promoted flat-buffer op (ch06_single_gpu/flat_adamw.h) that needs no list at all:
//
//   per_tensor_adamw     one call of the core's op (ops::adamw_update) per tensor: on CUDA one launch per tensor,
//                        148 for GPT-2 d12, most of them over a few hundred elements; on the CPU one OpenMP
//                        parallel loop per tensor
//   multi_tensor_adamw   (CUDA, multi_tensor_adamw.cu) Apex's multi-tensor apply: the list cut into chunks of
//                        `chunk` elements, up to 320 chunks of up to 36 tensors per launch, the tensors'
//                        addresses passed in the kernel's arguments
//
// Each tensor decays with hyper.weight_decay when its `decay` is set (GPT-2's 2-D weights), else not at all.
#pragma once

#include <cstdint>
#include <vector>

#include "common/core/tensor.h"
#include "common/ops/adamw.h"

namespace lab::ch06::adamw {

// One parameter tensor with its gradient and moments (views of any buffers; f32, equal sizes, one device).
struct TensorSet {
  Tensor params, grads, m, v;
  bool decay = false;
};

void per_tensor_adamw(const std::vector<TensorSet>& tensors, const ops::AdamWHyper& hyper, float grad_scale);

// Apex's chunk: 64K elements per block.
inline constexpr int64_t kDefaultChunk = 65536;
// CUDA tensors only; `chunk` > 0 (small chunks make the tests cross every boundary with little data).
void multi_tensor_adamw(const std::vector<TensorSet>& tensors, const ops::AdamWHyper& hyper, float grad_scale,
                        int64_t chunk = kDefaultChunk);

}  // namespace lab::ch06::adamw
