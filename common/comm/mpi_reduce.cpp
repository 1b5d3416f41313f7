// The dtype and reduction tables of the MPI backend, and the float-accumulating operators for 16-bit
// floats.
#include "common/comm/mpi_reduce.h"

#include <algorithm>

#include "common/comm/mpi_runtime.h"

namespace lab::comm {

namespace {

// ---------------------------------------------------------------- 16-bit floats

using ToFloat = float (*)(uint16_t);
using FromFloat = uint16_t (*)(float);

// MPI_User_function: inout[i] = in[i] (op) inout[i], computed in float and rounded back to 16 bits.
template <ToFloat to_float, FromFloat from_float, bool kMax>
void combine_16bit(void* in, void* inout, int* count, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *count; ++i) {
    const float x = to_float(a[i]);
    const float y = to_float(b[i]);
    b[i] = from_float(kMax ? std::max(x, y) : x + y);
  }
}

// [bf16, f16] x [sum, max]; MPI_OP_NULL outside MpiRuntime's lifetime.
MPI_Op g_16bit_ops[2][2] = {{MPI_OP_NULL, MPI_OP_NULL}, {MPI_OP_NULL, MPI_OP_NULL}};

int index_16bit(DType dtype) {
  return dtype == DType::BF16 ? 0 : 1;
}

}  // namespace

void create_16bit_reduce_ops() {
  constexpr int kCommutative = 1;
  MPI_CHECK(
      MPI_Op_create(&combine_16bit<bf16_bits_to_float, float_to_bf16_bits, false>, kCommutative, &g_16bit_ops[0][0]));
  MPI_CHECK(
      MPI_Op_create(&combine_16bit<bf16_bits_to_float, float_to_bf16_bits, true>, kCommutative, &g_16bit_ops[0][1]));
  MPI_CHECK(
      MPI_Op_create(&combine_16bit<f16_bits_to_float, float_to_f16_bits, false>, kCommutative, &g_16bit_ops[1][0]));
  MPI_CHECK(
      MPI_Op_create(&combine_16bit<f16_bits_to_float, float_to_f16_bits, true>, kCommutative, &g_16bit_ops[1][1]));
}

void free_16bit_reduce_ops() {
  for (auto& per_dtype : g_16bit_ops)
    for (MPI_Op& op : per_dtype)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
}

// ---------------------------------------------------------------- tables

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::F32: return MPI_FLOAT;
    case DType::I32: return MPI_INT32_T;
    case DType::BF16:
    case DType::F16:
    case DType::U16: return MPI_UINT16_T;
  }
  fail(ErrorKind::Internal, "no MPI datatype for dtype ", static_cast<int>(dtype));
}

MPI_Op mpi_reduce_op(DType dtype, ReduceOp op) {
  const bool max = op == ReduceOp::Max;
  if (dtype == DType::BF16 || dtype == DType::F16) {
    const MPI_Op user_op = g_16bit_ops[index_16bit(dtype)][max ? 1 : 0];
    LAB_CHECK(user_op != MPI_OP_NULL, Internal, "the 16-bit reduction operators are not created (no MpiRuntime)");
    return user_op;
  }
  LAB_ASSERT(dtype == DType::F32 || dtype == DType::I32);
  return max ? MPI_MAX : MPI_SUM;
}

void divide_elements(void* data, int64_t count, DType dtype, int divisor) {
  const float d = static_cast<float>(divisor);
  switch (dtype) {
    case DType::F32: {
      auto* f = static_cast<float*>(data);
      for (int64_t i = 0; i < count; ++i) f[i] /= d;
      return;
    }
    case DType::BF16:
    case DType::F16: {
      const bool bf16 = dtype == DType::BF16;
      const ToFloat to_float = bf16 ? ToFloat{bf16_bits_to_float} : ToFloat{f16_bits_to_float};
      const FromFloat from_float = bf16 ? FromFloat{float_to_bf16_bits} : FromFloat{float_to_f16_bits};
      auto* h = static_cast<uint16_t*>(data);
      for (int64_t i = 0; i < count; ++i) h[i] = from_float(to_float(h[i]) / d);
      return;
    }
    default: fail(ErrorKind::Internal, "divide_elements of ", dtype_name(dtype));
  }
}

}  // namespace lab::comm
