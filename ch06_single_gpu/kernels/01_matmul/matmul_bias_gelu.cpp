// Shape and dtype checks of ch06_single_gpu/matmul_bias_gelu.h, then dispatch by device.
#include "ch06_single_gpu/matmul_bias_gelu.h"

#include "common/ops/dispatch.h"

namespace lab::ch06 {

namespace {

bool has_bias(Epilogue e) {
  return e == Epilogue::Bias || e == Epilogue::BiasGelu;
}
bool uses_pre_gelu(Epilogue e) {
  return e == Epilogue::Gelu || e == Epilogue::BiasGelu || e == Epilogue::GeluGrad;
}

}  // namespace

const char* epilogue_name(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::None: return "none";
    case Epilogue::Bias: return "bias";
    case Epilogue::Gelu: return "gelu";
    case Epilogue::BiasGelu: return "bias+gelu";
    case Epilogue::GeluGrad: return "dgelu";
  }
  return "?";
}

void matmul_epilogue(const Tensor& out, const Tensor& pre_gelu, const Tensor& a, const Tensor& b, bool b_transposed,
                     const Tensor& bias, Epilogue epilogue) {
  constexpr const char* op = "matmul_epilogue";
  a.check_ndim(2, "matmul_epilogue a");
  b.check_ndim(2, "matmul_epilogue b");
  out.check_ndim(2, "matmul_epilogue out");
  const int64_t M = a.dim(0), K = a.dim(1), N = b_transposed ? b.dim(0) : b.dim(1);
  LAB_CHECK(K > 0, InvalidArgument, op, ": a ", shape_str(a.shape()), " has an empty inner dimension");
  b.check_shape(b_transposed ? Shape{N, K} : Shape{K, N}, "matmul_epilogue b");
  out.check_shape({M, N}, "matmul_epilogue out");
  LAB_CHECK(a.dtype() == DType::F32 || a.dtype() == DType::BF16 || a.dtype() == DType::F16, InvalidArgument, op,
            ": a is ", dtype_name(a.dtype()), "; f32, bf16 or f16 inputs");
  b.check_dtype(a.dtype(), "matmul_epilogue b (a's dtype)");
  LAB_CHECK(out.dtype() == DType::F32 || out.dtype() == a.dtype(), InvalidArgument, op, ": out is ",
            dtype_name(out.dtype()), " for ", dtype_name(a.dtype()), " inputs; f32 or the inputs' dtype");
  LAB_CHECK(has_bias(epilogue) == bias.defined(), InvalidArgument, op, ": the ", epilogue_name(epilogue), " epilogue ",
            has_bias(epilogue) ? "needs a bias" : "takes no bias");
  if (bias.defined()) {
    bias.check_shape({N}, "matmul_epilogue bias");
    bias.check_dtype(out.dtype(), "matmul_epilogue bias (out's dtype)");
  }
  LAB_CHECK(epilogue != Epilogue::GeluGrad || pre_gelu.defined(), InvalidArgument, op,
            ": the dgelu epilogue reads GELU's input, pre_gelu, which is missing");
  if (pre_gelu.defined()) {
    LAB_CHECK(uses_pre_gelu(epilogue), InvalidArgument, op, ": pre_gelu is only used by the GELU epilogues, not by ",
              epilogue_name(epilogue));
    pre_gelu.check_shape({M, N}, "matmul_epilogue pre_gelu");
    pre_gelu.check_dtype(out.dtype(), "matmul_epilogue pre_gelu (out's dtype)");
  }
  ops::check_same_device({&out, &pre_gelu, &a, &b, &bias}, op);
  if (M == 0 || N == 0) return;
  LAB_DISPATCH(out.device(), matmul_epilogue, out, pre_gelu, a, b, b_transposed, bias, epilogue);
}

void matmul_bias_gelu(const Tensor& out, const Tensor& pre_gelu, const Tensor& inp, const Tensor& weight,
                      const Tensor& bias) {
  weight.check_ndim(2, "matmul_bias_gelu weight ([out, in])");
  const int64_t OC = weight.dim(0), C = weight.dim(1);
  LAB_CHECK(inp.ndim() >= 1 && inp.dim(-1) == C && C > 0, InvalidArgument, "matmul_bias_gelu: input ",
            shape_str(inp.shape()), " does not match weight ", shape_str(weight.shape()), " ([out, in])");
  const int64_t rows = inp.numel() / C;
  LAB_CHECK(out.ndim() >= 1 && out.dim(-1) == OC && out.numel() == rows * OC, InvalidArgument,
            "matmul_bias_gelu: output ", shape_str(out.shape()), " should hold [", rows, ", ", OC, "]");
  if (pre_gelu.defined())
    LAB_CHECK(pre_gelu.shape() == out.shape(), InvalidArgument, "matmul_bias_gelu: pre_gelu ",
              shape_str(pre_gelu.shape()), " should have out's shape ", shape_str(out.shape()));
  matmul_epilogue(out.reshape({rows, OC}), pre_gelu.defined() ? pre_gelu.reshape({rows, OC}) : Tensor(),
                  inp.reshape({rows, C}), weight, true, bias, bias.defined() ? Epilogue::BiasGelu : Epilogue::Gelu);
}

}  // namespace lab::ch06
