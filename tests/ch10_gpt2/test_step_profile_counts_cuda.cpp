// The kernel launches (and cuBLAS calls) of one GPT-2 training step on CUDA (label cuda: runs in the emulation
// build, skips without a GPU), counted by the step profile: exact without a GPU, so an accidental extra kernel
// shows up here. The op count is the CPU's (test_step_profile_counts.cpp).
#include <gtest/gtest.h>

#include "ch06_single_gpu/fused_model.h"
#include "common/autograd/functions.h"
#include "common/core/device.h"
#include "tests/ch10_gpt2/step_profile_counts.h"

namespace lab {
namespace {

// Launches per block and outside the blocks at B = 2 (attention loops over the batch rows), fp32, the core's
// kernels and attention. Per block, 45: 4 cublasLt matmul (the 4 linears forward, the bias added in the matmul's
// epilogue), 8 cublasSgemm (the input's and the weight's gradient of each backward), 12 cublasSgemmStridedBatched
// (attention: 2 products x 2 rows forward, 4 x 2 backward), 4 column_piece_partial_sums_kernel + 4
// column_totals_kernel (the bias gradients), 2 LayerNorm forward, 2 layernorm_backward_pieces_kernel (dx, and the
// partial sums of dw and db from the same loads) + 2 column_totals_kernel, 1 + 2 causal softmax, 2 GELU and 2
// residual forward; each add's backward launches nothing: the residual stream and the branch both take the
// gradient's buffer as it is (ag::residual_into_stream).
// (47 while the branch took a copy, a gradient copy kernel per add; before that a residual_backward_kernel added the
// gradient into both, zero-filled. 53 before the bias moved into the matmul: a broadcast_bias_kernel per linear; 49
// before the LayerNorm backward took dw and db in dx's pass: a column_partial_sums_kernel of its own per LayerNorm.)
// Outside, 14: 2 embedding, ln_f's forward, backward and column totals, the LM head's cublasLt matmul and 2
// cublasSgemm, the fused classifier, the losses' sum and the gradient norm each as partial_sums_kernel and one
// thread adding the partial sums on the device (accumulate_sum_kernel, norm_and_scale_kernel: the step reads nothing
// back), AdamW.
constexpr int64_t kLaunchesPerBlock = 45;
constexpr int64_t kLaunchesOutside = 14;

TEST(StepProfileCountsCuda, LaunchesPerStep) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  for (const int64_t layers : {1, 2}) {
    const test::StepCounts counts = test::count_one_step(Device::cuda(), layers);
    EXPECT_EQ(counts.ops, 10 + 18 * layers) << layers << " blocks:\n" << counts.op_table;
    EXPECT_EQ(counts.kernels, kLaunchesOutside + kLaunchesPerBlock * layers) << layers << " blocks:\n"
                                                                             << counts.kernel_table;
    EXPECT_EQ(counts.zero_fills.count, test::expected_zero_fills(layers, Device::cuda()).count) << layers << " blocks";
    EXPECT_EQ(counts.zero_fills.bytes, test::expected_zero_fills(layers, Device::cuda()).bytes) << layers << " blocks";
  }
}

// The same step with bf16 matmuls and 16-bit activations end to end (ModelOptions::activations, gpt2_train's
// --dtype bf16 --activations 16bit), the core attention (fp32 inside). Per block, 42: 8 cublasLt matmul bf16 (the
// 4 linears forward, each adding the bias's bf16 copy in its epilogue and storing the bf16 out itself, and the 4
// input gradients), 4 cublasLt matmul+bgrad bf16 (the weight gradients, each writing its bias's gradient from its
// epilogue straight into the gradient: the step's first contribution to both, ag::parameter_gradients), 5
// convert_kernel around the fp32 core attention (qkv and the output forward; qkv, dout and the f32 qkv gradient
// backward, converted straight into qkv's own), 12 cublasSgemmStridedBatched, 2 LayerNorm forward and 2 + 2 backward, 1
// + 2 causal softmax, 2 GELU, 2 residual forward (46 while the parameters' gradients were zero-filled at the step's
// start and added into: an add_bias_gradient_kernel after each of the 4 epilogues, whose sums cuBLASLt writes; 48 while
// each add's backward copied the gradient for the branch). Outside, 14: as in fp32, with the LM head's 3 products as
// cublasLt matmul bf16, and no conversion: AdamW writes the weights' 16-bit copy in its own pass (adamw_kernel<Copy>).
// 49 per block before the f32 qkv gradient was converted into a fresh gradient (a residual_backward_kernel added its
// conversion into a zero-filled one); 53 before the bias gradients moved into the weight gradients' epilogue (4 + 4
// column sums instead of the 4 additions). Before the bias moved into the matmul's epilogue: 63 per block (4
// broadcast_bias_kernel and 4 convert_kernel more: each linear's out computed in fp32, then rounded) and 17 outside
// (the LM head computed its bf16 logits in fp32 and converted them); 55 and 16 before the LayerNorm backward took dw
// and db in dx's pass, 15 outside before AdamW wrote the copy (a convert_kernel after it).
constexpr int64_t kBf16LaunchesPerBlock = 42;
constexpr int64_t kBf16LaunchesOutside = 14;

TEST(StepProfileCountsCuda, LaunchesPerBf16StepWith16BitActivations) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  for (const int64_t layers : {1, 2}) {
    const test::StepCounts counts = test::count_one_step(Device::cuda(), layers, DType::BF16);
    EXPECT_EQ(counts.kernels, kBf16LaunchesOutside + kBf16LaunchesPerBlock * layers) << layers << " blocks:\n"
                                                                                     << counts.kernel_table;
    const ZeroFills fills = test::expected_zero_fills(layers, Device::cuda());
    EXPECT_EQ(counts.zero_fills.count, fills.count) << layers << " blocks";
    EXPECT_EQ(counts.zero_fills.bytes, fills.bytes) << layers << " blocks";
  }
}

// The same bf16 step with chapter 6's fused kernels (--kernels fused). Per block, 39: the 42 above less the GELU
// kernel forward and backward, and less the attention's residual add forward. The MLP's first
// GEMM applies bias and GELU in its epilogue (cublasLt matmul+gelu bf16, keeping GELU's input as its aux output), and
// in backward the GEMM that gives the GELU output's gradient applies GELU's derivative in its epilogue instead
// (cublasLt matmul+dgelu bf16), so 6 cublasLt matmul bf16 are left beside the 4 cublasLt matmul+bgrad bf16. The
// residual add before ln_2 runs in ln_2's forward kernel; its backward writes the sum's gradient, which the branch
// shares (43 per block while the 4 bias gradients were added into zero-filled ones; 44 while ln_2's backward kernel
// also wrote the branch a copy and the block's last add launched a copy; 46 before, 47 before the f32 qkv gradient was
// converted straight into qkv's, 51 before the weight gradients took the bias gradients). The fused classifier is the
// core's launch count. Outside, 14, as above.
constexpr int64_t kFusedBf16LaunchesPerBlock = 39;
constexpr int64_t kFusedBf16LaunchesOutside = 14;

// The same bf16 step with flash attention in bf16 (gpt2_train's --attention flash): attention's backward stores every
// element of qkv's gradient once, over a new buffer (no f32 workspace either), so the blocks zero-fill nothing (the
// zero-fills are the 2 outside them, as with every attention now). Per block, 26 (30 before the bias gradients were
// written by the weight gradients' epilogues, as above): the 42 of the core
// attention less its 5 conversions, 12 strided-batched GEMMs and 3 softmax kernels, plus flash attention's forward and
// its backward's 3 (the rows' dot products, the dK/dV and the dQ kernels).
constexpr int64_t kFlashBf16LaunchesPerBlock = 26;

TEST(StepProfileCountsCuda, FlashAttentionWritesTheQkvGradientWithoutZeroFilling) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  ModelOptions options;
  options.attention = [](Tape& tape, const Var& qkv, int n_head) {
    return ag::flash_attention(tape, qkv, n_head, DType::BF16);
  };
  for (const int64_t layers : {1, 2}) {
    const test::StepCounts counts = test::count_one_step(Device::cuda(), layers, DType::BF16, options);
    EXPECT_EQ(counts.kernels, kBf16LaunchesOutside + kFlashBf16LaunchesPerBlock * layers) << layers << " blocks:\n"
                                                                                          << counts.kernel_table;
    const ZeroFills fills = test::expected_zero_fills(layers, Device::cuda());
    EXPECT_EQ(counts.zero_fills.count, fills.count) << layers << " blocks:\n" << counts.kernel_table;
    EXPECT_EQ(counts.zero_fills.bytes, fills.bytes) << layers << " blocks";
  }
}

TEST(StepProfileCountsCuda, LaunchesPerBf16StepWithFusedKernels) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  for (const int64_t layers : {1, 2}) {
    const test::StepCounts counts =
        test::count_one_step(Device::cuda(), layers, DType::BF16, ch06::with_kernels({}, ch06::Kernels::Fused));
    EXPECT_EQ(counts.kernels, kFusedBf16LaunchesOutside + kFusedBf16LaunchesPerBlock * layers) << layers << " blocks:\n"
                                                                                               << counts.kernel_table;
  }
}

}  // namespace
}  // namespace lab
