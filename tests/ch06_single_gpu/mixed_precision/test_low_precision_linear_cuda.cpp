// The 16-bit Linear and the conversions on CUDA against the CPU (cuBLASLt with bf16/fp16 operands and fp32
// accumulation; the conversion kernels), and a GPT-2 step under mixed precision on both backends.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/autograd/tape.h"
#include "common/nn/gpt2.h"
#include "common/ops/convert.h"
#include "common/ops/reduce.h"
#include "tests/ch06_single_gpu/mixed_precision/linear_cases.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/support/op_check.h"
#include "tests/support/test_support.h"

namespace lab::test {
namespace {

class LowPrecisionLinearCuda : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

TEST_P(LowPrecisionLinearCuda, MatchesTheCpu) {
  const DType dtype = GetParam();
  Rng rng(7);
  for (const auto& [N, C, OC] : {std::tuple<int64_t, int64_t, int64_t>{37, 96, 50}, {128, 64, 192}, {1, 8, 3}}) {
    const LinearCase c = random_linear_case(N, C, OC, rng);
    const LinearResult gpu = low_precision_linear_on(c, dtype, kGpu);
    const LinearResult cpu = low_precision_linear_on(c, dtype, Device::cpu());
    // The same 16-bit operands on both sides: only the order of the fp32 sums differs.
    EXPECT_TRUE(all_close("out", gpu.out, cpu.out, tolerance_for(DType::F32, C)));
    EXPECT_TRUE(all_close("dx", gpu.dx, cpu.dx, tolerance_for(DType::F32, OC)));
    EXPECT_TRUE(all_close("dweight", gpu.dweight, cpu.dweight, tolerance_for(DType::F32, N)));
    EXPECT_TRUE(all_close("dbias", gpu.dbias, cpu.dbias, tolerance_for(DType::F32, N)));
  }
}

TEST_P(LowPrecisionLinearCuda, ConvertsBitForBitLikeTheCpu) {
  const DType dtype = GetParam();
  Rng rng(5);
  std::vector<float> values = random_normal({1000}, rng, 300.0f).to_floats();
  const float inf = std::numeric_limits<float>::infinity();
  for (float special : {65504.0f, 65520.0f, -1e6f, 1e-8f, 3e-5f, -0.0f, inf, 1.00048828125f}) values.push_back(special);
  const Tensor src = Tensor::from_floats(values, {static_cast<int64_t>(values.size())});
  const Tensor cpu = Tensor::empty(src.shape(), dtype), gpu = Tensor::empty(src.shape(), dtype, kGpu);
  ops::convert(cpu, src);
  ops::convert(gpu, src.to(kGpu));
  EXPECT_EQ(gpu.to_floats(), cpu.to_floats());
  const Tensor widened = Tensor::empty(src.shape(), DType::F32, kGpu);
  ops::convert(widened, gpu);
  EXPECT_EQ(widened.to_floats(), cpu.to_floats());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LowPrecisionLinearCuda, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A tiny GPT-2 with 16-bit matmuls: the same loss and gradients on both backends (the 16-bit weight copy, the
// rounded inputs of every Linear and of the tied LM head).
TEST_P(LowPrecisionLinearCuda, Gpt2LossAndGradientsMatchTheCpu) {
  const DType dtype = GetParam();
  GPT2Config config = GPT2Config::from_name("tiny");
  config.vocab_size = 200;
  config.padded_vocab_size = static_cast<int>(GPT2Config::pad_vocab(200));
  Rng rng(9);
  const Tensor tokens = random_ids({2, 16}, rng, 200), targets = random_ids({2, 16}, rng, 200);
  std::vector<double> losses;
  std::vector<Tensor> grads;
  for (const Device device : {Device::cpu(), kGpu}) {
    GPT2 model(config, device);
    model.init_weights(1);
    model.set_matmul_dtype(dtype);
    Tape tape;
    const Tensor loss = model.loss(tape, tokens.to(device), targets.to(device));
    tape.backward();
    losses.push_back(ops::sum(loss) / static_cast<double>(loss.numel()));
    grads.push_back(model.parameters().grads().to(Device::cpu()));
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-4 * losses[0]);
  // Activations rounded to 16 bits may land on the other side of a rounding boundary on one backend: one
  // 16-bit step of difference, carried through the layers above. The 16-bit tolerance covers it.
  EXPECT_TRUE(all_close("gradients", grads[1], grads[0], tolerance_for(dtype, config.n_embd)));
}

}  // namespace
}  // namespace lab::test
