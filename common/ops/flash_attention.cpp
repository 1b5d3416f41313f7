#include "common/ops/flash_attention.h"

#include "common/core/dtype.h"
#include "common/core/error.h"
#include "common/ops/attention_shape.h"
#include "common/ops/dispatch.h"

namespace lab::ops {

namespace {

void check_float_storage(const Tensor& t, DType expected, const char* what) {
  LAB_CHECK(expected == DType::F32 || expected == DType::BF16 || expected == DType::F16, InvalidArgument, what, ": ",
            dtype_name(expected), " (flash attention takes f32, bf16 or f16)");
  t.check_dtype(expected, what);
}

void check_flash(const Tensor& qkv, const Tensor& out, const Tensor& lse, int n_head, const char* op) {
  const AttentionDims d = check_attention_qkv(qkv, n_head, "flash attention qkv", op);
  check_float_storage(qkv, qkv.dtype(), "flash attention qkv");
  check_float_storage(out, qkv.dtype(), "flash attention out (the dtype of qkv)");
  out.check_shape({d.B, d.T, d.C}, "flash attention out");
  lse.check_dtype(DType::F32, "flash attention lse");
  lse.check_shape({d.B, n_head, d.T}, "flash attention lse");
}

}  // namespace

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head, FlashTiles tiles) {
  check_flash(qkv, out, lse, n_head, "flash_attention_forward");
  check_same_device({&out, &lse, &qkv}, "flash_attention_forward");
  LAB_DISPATCH(qkv.device(), flash_attention_forward, out, lse, qkv, n_head, tiles);
}

void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head, GradWrite dqkv_write, FlashBackward passes,
                              FlashTiles tiles) {
  check_flash(qkv, out, lse, n_head, "flash_attention_backward");
  check_float_storage(dqkv, qkv.dtype(), "flash attention dqkv (the dtype of qkv)");
  dqkv.check_shape(qkv.shape(), "flash attention dqkv");
  check_float_storage(dout, qkv.dtype(), "flash attention dout (the dtype of qkv)");
  dout.check_shape(out.shape(), "flash attention dout");
  check_same_device({&dqkv, &dout, &qkv, &out, &lse}, "flash_attention_backward");
  LAB_DISPATCH(qkv.device(), flash_attention_backward, dqkv, dout, qkv, out, lse, n_head, dqkv_write, passes, tiles);
}

const char* flash_tiles_name(FlashTiles tiles) {
  switch (tiles) {
    case FlashTiles::Rows128: return "rows 128";
    case FlashTiles::Rows128Steps16: return "rows 128, steps of 16";
    case FlashTiles::Timed: return "timed";
    case FlashTiles::Rows64: break;
  }
  return "rows 64";
}

std::vector<std::string> flash_tile_choices() {
#ifdef LAB_WITH_CUDA
  return cuda::flash_tile_choices();
#else
  return {};
#endif
}

}  // namespace lab::ops
