#include "common/ops/embedding.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

namespace {
// The activation (out, dout) may be stored in 16 bits (embedding.h).
void check_activation_dtype(const Tensor& t, const char* what, const char* op) {
  t.check_defined(what);
  LAB_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16 || t.dtype() == DType::F16, InvalidArgument, op, ": ",
            what, " is ", dtype_name(t.dtype()), "; it must be f32, bf16 or f16");
}

// The tables and their gradients stay f32 whatever the activations are (embedding.h).
void check_table_dtype(const Tensor& t, const char* what, const char* op) {
  t.check_defined(what);
  LAB_CHECK(t.dtype() == DType::F32, InvalidArgument, op, ": ", what, " is ", dtype_name(t.dtype()),
            "; wte, wpe and their gradients are f32 whatever the activations are");
}
}  // namespace

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) {
  tokens.check_dtype(DType::I32, "embedding tokens");
  tokens.check_ndim(2, "embedding tokens");
  wte.check_ndim(2, "embedding wte");
  wpe.check_ndim(2, "embedding wpe");
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(1);
  LAB_CHECK(wpe.dim(1) == C, InvalidArgument, "embedding: wte has ", C, " channels, wpe ", wpe.dim(1));
  LAB_CHECK(T <= wpe.dim(0), InvalidArgument, "embedding: sequence length ", T, " exceeds the ", wpe.dim(0),
            " positions of wpe");
  out.check_shape({B, T, C}, "embedding out");
  check_activation_dtype(out, "out", "embedding_forward");
  check_table_dtype(wte, "wte", "embedding_forward");
  check_table_dtype(wpe, "wpe", "embedding_forward");
  check_same_device({&out, &tokens, &wte, &wpe}, "embedding_forward");
  LAB_DISPATCH(out.device(), embedding_forward, out, tokens, wte, wpe);
}

void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                        GradWrite dwpe_write) {
  tokens.check_dtype(DType::I32, "embedding tokens");
  tokens.check_ndim(2, "embedding tokens");
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = dwte.dim(1);
  dout.check_shape({B, T, C}, "embedding dout");
  LAB_CHECK(dwpe.dim(1) == C && T <= dwpe.dim(0), InvalidArgument, "embedding_backward: dwpe shape ",
            shape_str(dwpe.shape()));
  check_activation_dtype(dout, "dout", "embedding_backward");
  check_table_dtype(dwte, "dwte", "embedding_backward");
  check_table_dtype(dwpe, "dwpe", "embedding_backward");
  check_same_device({&dwte, &dwpe, &dout, &tokens}, "embedding_backward");
  // Written over, dwpe's rows that no position reaches hold the sums over nothing: past T, or all of them without
  // a batch row. The backends write rows [0, T) and only when there is a batch row.
  if (dwpe_write == GradWrite::Overwrite) {
    const int64_t first_unreached = B == 0 ? 0 : T;
    if (first_unreached < dwpe.dim(0)) dwpe.slice_rows(first_unreached, dwpe.dim(0)).zero_();
  }
  LAB_DISPATCH(dout.device(), embedding_backward, dwte, dwpe, dout, tokens, dwpe_write);
}

void embedding_backward_rows(const Tensor& dwte_rows, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                             int64_t first_row) {
  tokens.check_dtype(DType::I32, "embedding tokens");
  tokens.check_ndim(2, "embedding tokens");
  dout.check_ndim(3, "embedding dout");
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = dout.dim(2);
  dout.check_shape({B, T, C}, "embedding dout");
  LAB_CHECK(dout.dtype() == DType::F32, InvalidArgument, "embedding_backward_rows: dout is ", dtype_name(dout.dtype()),
            "; it must be f32 (only embedding_backward takes a bf16 or f16 dout)");
  if (dwte_rows.defined()) {
    dwte_rows.check_ndim(2, "embedding dwte rows");
    LAB_CHECK(dwte_rows.dim(1) == C && first_row >= 0, InvalidArgument, "embedding_backward_rows: dwte rows shape ",
              shape_str(dwte_rows.shape()), " from row ", first_row, " for a width of ", C);
    check_table_dtype(dwte_rows, "dwte rows", "embedding_backward_rows");
  }
  if (dwpe.defined()) {
    LAB_CHECK(dwpe.ndim() == 2 && dwpe.dim(1) == C && T <= dwpe.dim(0), InvalidArgument,
              "embedding_backward_rows: dwpe shape ", shape_str(dwpe.shape()));
    check_table_dtype(dwpe, "dwpe", "embedding_backward_rows");
  }
  check_same_device({&dout, &dwte_rows, &dwpe, &tokens}, "embedding_backward_rows");
  LAB_DISPATCH(dout.device(), embedding_backward_rows, dwte_rows, dwpe, dout, tokens, first_row);
}

}  // namespace lab::ops
