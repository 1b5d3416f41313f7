// The CUDA kernels of the vocabulary-parallel ops against the CPU reference on fresh random inputs: the
// embedding of a slice (tokens inside and outside it, repeated tokens racing on one row), the three passes
// of the cross-entropy combined over 1, 2 and 4 slices (logits around 1000, slices without real columns),
// and the bias with its gradient (odd sizes). Outputs are poisoned with NaN, so an element a kernel forgets
// fails; gradients start non-zero, so a kernel that overwrites instead of adding fails too.
#include <gtest/gtest.h>

#include "ch08_distributed/tp/vocab_parallel_ops.h"
#include "common/ops/embedding.h"
#include "tests/ch08_distributed/tp_ops_reference.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/support/op_check.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using namespace ch08::tp;
using test::all_close;
using test::kGpu;
using test::poisoned;
using test::tolerance_for;

class TensorParallelCuda : public ::testing::Test {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

TEST_F(TensorParallelCuda, EmbeddingOfASlice) {
  Rng rng(1);
  const int64_t B = 4, T = 33, C = 40, V = 384, S = 128, start = 128;
  const Tensor slice = test::random_normal({S, C}, rng);
  Tensor tokens = test::random_ids({B, T}, rng, V);
  {
    std::vector<int32_t> ids = tokens.to_ints();
    for (size_t i = 0; i < ids.size(); i += 3) ids[i] = 200;  // one row of the slice, added to by many threads
    tokens = Tensor::from_ints(ids, {B, T});
  }
  const Tensor expected = Tensor::empty({B, T, C}, DType::F32);
  vocab_slice_embedding_forward(expected, tokens, slice, start, V);
  const Tensor out = poisoned({B, T, C}, kGpu);
  vocab_slice_embedding_forward(out, tokens.to(kGpu), slice.to(kGpu), start, V);
  EXPECT_TRUE(all_close("embedding", out, expected, tolerance_for(DType::F32, 1)));

  const Tensor dout = test::random_normal({B, T, C}, rng), dslice = test::random_normal({S, C}, rng);
  const Tensor dslice_gpu = dslice.to(kGpu);
  ops::embedding_backward_rows(dslice, Tensor(), dout, tokens, start);
  ops::embedding_backward_rows(dslice_gpu, Tensor(), dout.to(kGpu), tokens.to(kGpu), start);
  EXPECT_TRUE(all_close("dwte slice", dslice_gpu, dslice, tolerance_for(DType::F32, B * T)));
}

TEST_F(TensorParallelCuda, CrossEntropyOverSlices) {
  Rng rng(2);
  const int64_t N = 45, vocab = 300, Vp = 512;
  std::vector<float> values = test::random_normal({N, Vp}, rng, 3.0f).to_floats();
  for (float& v : values) v += 1000.0f;
  const Tensor logits = Tensor::from_floats(values, {N, Vp});
  const Tensor targets = test::random_ids({N}, rng, vocab);
  for (int tp : {1, 2, 4}) {
    const test::SlicedCrossEntropy cpu = test::sliced_cross_entropy(logits, targets, vocab, tp, 0.5f);
    const test::SlicedCrossEntropy gpu = test::sliced_cross_entropy(logits.to(kGpu), targets.to(kGpu), vocab, tp, 0.5f);
    EXPECT_TRUE(all_close("losses", Tensor::from_floats(gpu.losses, {N}), Tensor::from_floats(cpu.losses, {N}),
                          test::tolerance_for_offset(DType::F32, Vp, 1000.0 / 3.0)))
        << tp << " slices";
    EXPECT_TRUE(all_close("dlogits", Tensor::from_floats(gpu.grads, {N, Vp}), Tensor::from_floats(cpu.grads, {N, Vp}),
                          test::tolerance_for_offset(DType::F32, Vp, 1000.0 / 3.0)))
        << tp << " slices";
  }
}

TEST_F(TensorParallelCuda, BiasAndItsGradient) {
  Rng rng(3);
  for (const auto& [N, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 33}, {300, 257}, {4, 64 * 768}}) {
    const Tensor x = test::random_normal({N, K}, rng), bias = test::random_normal({K}, rng);
    const Tensor x_gpu = x.to(kGpu);
    add_bias(x, bias);
    add_bias(x_gpu, bias.to(kGpu));
    EXPECT_TRUE(all_close("x + bias", x_gpu, x, tolerance_for(DType::F32, 1))) << N << " x " << K;
    const Tensor dout = test::random_normal({N, K}, rng), dbias = test::random_normal({K}, rng);
    const Tensor dbias_gpu = dbias.to(kGpu);
    add_bias_grad(dbias, dout);
    add_bias_grad(dbias_gpu, dout.to(kGpu));
    EXPECT_TRUE(all_close("dbias", dbias_gpu, dbias, tolerance_for(DType::F32, N))) << N << " x " << K;
  }
}

}  // namespace
}  // namespace lab
