#include "tests/ch06_single_gpu/fused_model/residual_layernorm_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ch06_single_gpu/fused_functions.h"
#include "common/autograd/functions.h"
#include "common/util/rng.h"
#include "tests/support/test_support.h"

namespace lab::test {

namespace {

struct Inputs {
  Tensor a, b, weight, bias, dout, dsum;  // dsum: the gradient from the sum's other reader; undefined: none
};

Inputs random_inputs(int64_t rows, int64_t C, DType dtype, bool with_dsum, uint64_t seed) {
  Rng rng(seed);
  Inputs in;
  in.a = random_normal({rows, C}, rng).to_dtype(dtype);
  in.b = random_normal({rows, C}, rng, 0.5f).to_dtype(dtype);
  in.weight = random_normal({C}, rng);
  in.bias = random_normal({C}, rng, 0.1f);
  in.dout = random_normal({rows, C}, rng).to_dtype(dtype);
  if (with_dsum) in.dsum = random_normal({rows, C}, rng).to_dtype(dtype);
  return in;
}

struct Results {
  std::vector<float> sum, normalized, da, db, dweight, dbias;
};

// Runs forward and backward through `fused` (ch06::residual_layernorm) or the reference functions, on `device`, with
// the outputs' gradients bound as the sum's other reader and the next sub-layer would leave them.
Results run(const Inputs& in, Device device, bool fused) {
  const Var a(in.a.to(device)), b(in.b.to(device));
  const LayerNorm ln{Var(in.weight.to(device)), Var(in.bias.to(device))};
  Tape tape;
  ch06::ResidualNorm out;
  if (fused) {
    out = ch06::residual_layernorm(tape, a, b, ln);
  } else {
    out.residual = ag::residual(tape, a, b);
    out.normalized = ln.forward(tape, out.residual);
  }
  out.normalized.bind_grad(in.dout.to(device));
  if (in.dsum.defined()) out.residual.bind_grad(in.dsum.to(device));
  Results r{out.residual.value().to_floats(), out.normalized.value().to_floats(), {}, {}, {}, {}};
  tape.backward();
  r.da = a.grad().to_floats();
  r.db = b.grad().to_floats();
  r.dweight = ln.weight.grad().to_floats();
  r.dbias = ln.bias.grad().to_floats();
  return r;
}

}  // namespace

void expect_residual_layernorm_is_the_unfused_functions(Device device, DType dtype) {
  // 64 and 768 (GPT-2's) in 16-byte pieces of 8 values, one or three a lane; 40: 5 pieces; 36 splits into none.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{6, 64}, {3, 768}, {5, 40}, {4, 36}};
  uint64_t seed = 1;
  for (const auto& [rows, C] : shapes)
    for (const bool with_dsum : {true, false}) {
      const std::string where = std::string(dtype_name(dtype)) + " " + std::to_string(rows) + " x " +
                                std::to_string(C) + (with_dsum ? ", sum's gradient added to" : ", written over");
      const Inputs in = random_inputs(rows, C, dtype, with_dsum, seed++);
      const Results fused = run(in, device, true), reference = run(in, device, false);
      EXPECT_EQ(fused.sum, reference.sum) << where;
      EXPECT_EQ(fused.normalized, reference.normalized) << where;
      EXPECT_EQ(fused.da, reference.da) << where;
      EXPECT_EQ(fused.db, reference.db) << where;
      EXPECT_EQ(fused.dweight, reference.dweight) << where;
      EXPECT_EQ(fused.dbias, reference.dbias) << where;
    }
}

}  // namespace lab::test
