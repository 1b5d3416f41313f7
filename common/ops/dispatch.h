// Dispatch of an op to its backend by the device of its tensors.
//
// Each op header declares the public op plus the same signature in `namespace cpu` and `namespace cuda`;
// the op's .cpp checks shapes once, for both backends, and then calls LAB_DISPATCH. In a build without
// CUDA, a CUDA tensor gives one clear Unsupported error instead of a link error or a crash.
#pragma once

#include <initializer_list>

#include "common/core/tensor.h"

namespace lab::ops {

// Throws InvalidArgument unless every defined tensor sits on the same device as the first.
void check_same_device(std::initializer_list<const Tensor*> tensors, const char* op);

}  // namespace lab::ops

#ifdef LAB_WITH_CUDA
#define LAB_DISPATCH(device, fn, ...) \
  do {                                \
    if ((device).is_cuda())           \
      cuda::fn(__VA_ARGS__);          \
    else                              \
      cpu::fn(__VA_ARGS__);           \
  } while (0)
#else
#define LAB_DISPATCH(device, fn, ...)                                                                      \
  do {                                                                                                     \
    if ((device).is_cuda())                                                                                \
      ::lab::fail(::lab::ErrorKind::Unsupported, #fn ": CUDA tensor, but this build has no CUDA backend"); \
    cpu::fn(__VA_ARGS__);                                                                                  \
  } while (0)
#endif
