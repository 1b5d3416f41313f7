// Dispatch of an op to its backend by the device of its tensors, and to its kernel by their dtype.
//
// Each op header declares the public op plus the same signature in `namespace cpu` and `namespace cuda`;
// the op's .cpp checks shapes once, for both backends, and then calls LAB_DISPATCH. In a build without
// CUDA, a CUDA tensor gives one clear Unsupported error instead of a link error or a crash.
#pragma once

#include <initializer_list>

#include "common/core/dtype.h"
#include "common/core/error.h"
#include "common/core/step_profile.h"
#include "common/core/tensor.h"

namespace lab::ops {

// Throws InvalidArgument unless every defined tensor sits on the same device as the first.
void check_same_device(std::initializer_list<const Tensor*> tensors, const char* op);
// Throws InvalidArgument unless every defined tensor has the dtype of the first, a float one (f32, bf16, f16).
void check_same_float_dtype(std::initializer_list<const Tensor*> tensors, const char* op);

// ---------------------------------------------------------------- dispatch on the dtype
// An op whose kernels are templated on the storage type T of its tensors (float, Bf16, F16: dtype.h; the CUDA
// side maps them to its own types, cuda/dtype_dispatch.cuh) picks the instantiation with
//
//     dispatch_float_dtype(x.dtype(), "gelu_forward", [&](auto tag) {
//       using T = typename decltype(tag)::type;
//       run<T>(out.data<T>(), x.data<T>(), n);
//     });
//
// The arithmetic stays fp32 inside the kernels (load as float, compute, store rounded): the dtype says how
// tensors are stored, not how they are computed.
template <typename T>
struct TypeTag {
  using type = T;
};

template <typename Body>
void dispatch_float_dtype(DType dtype, const char* op, Body&& body) {
  switch (dtype) {
    case DType::F32: return body(TypeTag<float>{});
    case DType::BF16: return body(TypeTag<Bf16>{});
    case DType::F16: return body(TypeTag<F16>{});
    default: fail(ErrorKind::InvalidArgument, op, ": ", dtype_name(dtype), " is not a float dtype (f32, bf16, f16)");
  }
}

}  // namespace lab::ops

// Each dispatch is one op call for the step profile and an NVTX range (common/core/step_profile.h).
#ifdef LAB_WITH_CUDA
#define LAB_DISPATCH(device, fn, ...)              \
  do {                                             \
    const ::lab::ProfiledOp lab_profiled_op_(#fn); \
    if ((device).is_cuda())                        \
      cuda::fn(__VA_ARGS__);                       \
    else                                           \
      cpu::fn(__VA_ARGS__);                        \
  } while (0)
#else
#define LAB_DISPATCH(device, fn, ...)                                                                      \
  do {                                                                                                     \
    if ((device).is_cuda())                                                                                \
      ::lab::fail(::lab::ErrorKind::Unsupported, #fn ": CUDA tensor, but this build has no CUDA backend"); \
    const ::lab::ProfiledOp lab_profiled_op_(#fn);                                                         \
    cpu::fn(__VA_ARGS__);                                                                                  \
  } while (0)
#endif
