// The vocabulary-parallel ops on the CPU against the core's whole-vocabulary ops: the embedding summed over
// the slices is the core's embedding, the cross-entropy combined over the slices is the core's fused
// classifier (loss and gradient), with logits around 1000 (a missing max subtraction overflows), slices
// without any real column, and 1, 2 and 4 slices; the bias and its gradient against plain loops; bad ids.
#include <gtest/gtest.h>

#include "ch08_distributed/tp/vocab_parallel_ops.h"
#include "common/ops/classifier.h"
#include "common/ops/embedding.h"
#include "tests/ch08_distributed/tp_ops_reference.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using namespace ch08::tp;

TEST(VocabParallelEmbedding, SlicesSumToTheWholeTable) {
  Rng rng(1);
  const int64_t B = 3, T = 5, C = 24, V = 256;
  const Tensor wte = test::random_normal({V, C}, rng);
  const Tensor tokens = test::random_ids({B, T}, rng, V);
  const Tensor no_positions = Tensor::zeros({T, C}, DType::F32);
  const Tensor expected = Tensor::empty({B, T, C}, DType::F32);
  ops::embedding_forward(expected, tokens, wte, no_positions);
  const Tensor dout = test::random_normal({B, T, C}, rng);
  const Tensor dwte_expected = Tensor::zeros({V, C}, DType::F32), dwpe = Tensor::zeros({T, C}, DType::F32);
  ops::embedding_backward(dwte_expected, dwpe, dout, tokens);

  for (int tp : {1, 2, 4}) {
    const int64_t S = V / tp;
    std::vector<float> sum(static_cast<size_t>(B * T * C), 0.0f);
    for (int r = 0; r < tp; ++r) {
      const Tensor slice = wte.slice_rows(r * S, (r + 1) * S);
      const Tensor out = Tensor::empty({B, T, C}, DType::F32);
      vocab_slice_embedding_forward(out, tokens, slice, r * S, V);
      const std::vector<float> o = out.to_floats();
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += o[i];
      // Backward accumulates into the slice's rows of the whole gradient.
      const Tensor dslice = Tensor::from_floats(std::vector<float>(static_cast<size_t>(S * C), 0.5f), {S, C});
      ops::embedding_backward_rows(dslice, Tensor(), dout, tokens, r * S);
      std::vector<float> expected_slice = dwte_expected.slice_rows(r * S, (r + 1) * S).to_floats();
      for (float& e : expected_slice) e += 0.5f;
      EXPECT_LT(test::max_abs_error(dslice.to_floats(), expected_slice), 1e-5) << "slice " << r << " of " << tp;
    }
    EXPECT_EQ(sum, expected.to_floats()) << tp << " slices";
  }
  const Tensor bad = Tensor::from_ints(std::vector<int32_t>{3, 256}, {1, 2});
  testing::expect_error(
      [&] {
        vocab_slice_embedding_forward(Tensor::empty({1, 2, C}, DType::F32), bad, wte.slice_rows(0, 128), 0, V);
      },
      ErrorKind::InvalidArgument, {"token id 256", "outside the vocabulary [0, 256)"});
}

class VocabParallelCrossEntropy : public ::testing::TestWithParam<int> {};

TEST_P(VocabParallelCrossEntropy, CombinedSlicesAreTheFusedClassifier) {
  const int tp = GetParam();
  Rng rng(2 + tp);
  // 300 real columns padded to 512: with 4 slices of 128, the last slice holds no real column at all.
  const int64_t N = 37, vocab = 300, Vp = 512;
  std::vector<float> values = test::random_normal({N, Vp}, rng, 3.0f).to_floats();
  for (float& v : values) v += 1000.0f;
  const Tensor logits = Tensor::from_floats(values, {N, Vp});
  const Tensor targets = test::random_ids({N}, rng, vocab);
  const float dloss = 1.0f / static_cast<float>(N);

  const Tensor expected = logits.clone(), expected_losses = Tensor::empty({N}, DType::F32);
  ops::fused_classifier(expected, expected_losses, targets, vocab, dloss);
  const test::SlicedCrossEntropy got = test::sliced_cross_entropy(logits, targets, vocab, tp, dloss);
  EXPECT_LT(test::max_scaled_error(got.losses, expected_losses.to_floats()), 1e-5);
  EXPECT_LT(test::max_scaled_error(got.grads, expected.to_floats()), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Slices, VocabParallelCrossEntropy, ::testing::Values(1, 2, 4));

TEST(VocabParallelCrossEntropyErrors, TargetsOutsideTheVocabulary) {
  const Tensor logits = Tensor::zeros({2, 64}, DType::F32), stat = Tensor::zeros({2}, DType::F32);
  const Tensor targets = Tensor::from_ints(std::vector<int32_t>{1, 300}, {2});
  testing::expect_error([&] { vocab_slice_max_and_target(logits, targets, 64, 300, stat, stat); },
                        ErrorKind::InvalidArgument, {"target 300 at row 1", "outside [0, 300)"});
}

TEST(RowParallelBias, AddedToEveryRowAndItsGradientIsTheRowSum) {
  Rng rng(3);
  const int64_t N = 70, K = 130;  // K spans more than two of the CPU loop's column slices
  const Tensor x = test::random_normal({N, K}, rng), bias = test::random_normal({K}, rng);
  std::vector<float> expected = x.to_floats();
  const std::vector<float> b = bias.to_floats();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) expected[n * K + k] += b[k];
  add_bias(x, bias);
  EXPECT_EQ(x.to_floats(), expected);

  const Tensor dout = test::random_normal({N, K}, rng), dbias = Tensor::from_floats(b, {K});
  std::vector<double> sums(b.begin(), b.end());
  const std::vector<float> d = dout.to_floats();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) sums[k] += d[n * K + k];
  add_bias_grad(dbias, dout);
  EXPECT_LT(test::max_abs_error(dbias.to_floats(), std::vector<float>(sums.begin(), sums.end())), 1e-4);
  testing::expect_error(
      [&] {
        add_bias(Tensor::zeros({5, 3}, DType::F32), bias);
      },
      ErrorKind::InvalidArgument, {"is not rows of a bias of 130"});
}

}  // namespace
}  // namespace lab
