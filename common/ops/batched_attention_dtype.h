// The dtype dispatch of batched_attention.h's two backends, which take the 16-bit storage types only: the public
// ops send f32 to attention.h.
#pragma once

#include <type_traits>

#include "common/core/dtype.h"
#include "common/core/error.h"
#include "common/ops/dispatch.h"

namespace lab::ops {

// Runs body(TypeTag<T>) for the 16-bit storage type T of `dtype`; f32 is an InvalidArgument error of `op`, whose
// message names the `backend` ("CPU", "CUDA").
template <typename Body>
void dispatch_16bit(DType dtype, const char* op, const char* backend, Body&& body) {
  dispatch_float_dtype(dtype, op, [&](auto tag) {
    if constexpr (std::is_same_v<typename decltype(tag)::type, float>)
      fail(ErrorKind::InvalidArgument, op, ": f32 is ops::attention's (the ", backend, " backend takes bf16 and f16)");
    else
      body(tag);
  });
}

}  // namespace lab::ops
