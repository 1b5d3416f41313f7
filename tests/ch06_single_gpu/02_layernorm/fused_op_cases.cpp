#include "tests/ch06_single_gpu/02_layernorm/fused_op_cases.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "ch06_single_gpu/fused_residual_layernorm.h"
#include "common/ops/layernorm.h"
#include "common/ops/residual.h"
#include "tests/support/test_support.h"

namespace lab::test {

namespace {

Tensor shifted(const Tensor& t, float offset) {
  std::vector<float> v = t.to_floats();
  for (float& x : v) x += offset;
  return Tensor::from_floats(v, t.shape());
}

}  // namespace

FusedInputs random_fused_inputs(int64_t N, int64_t C, float offset, Rng& rng) {
  FusedInputs in;
  in.a = shifted(random_normal({N, C}, rng), offset);
  in.b = random_normal({N, C}, rng);
  in.weight = shifted(random_normal({C}, rng, 0.5f), 1.0f);
  in.bias = random_normal({C}, rng, 0.5f);
  in.dout = random_normal({N, C}, rng);
  in.dresidual = random_normal({N, C}, rng);
  in.da = random_normal({N, C}, rng);
  in.db = random_normal({N, C}, rng);
  in.dweight = random_normal({C}, rng);
  in.dbias = random_normal({C}, rng);
  return in;
}

std::string GradientSet::name() const {
  std::string n = dresidual ? "dres" : "nodres";
  n += da ? (da_is_dresidual ? "_da_is_dres" : "_da") : "_noda";
  n += db ? "_db" : "_nodb";
  if (params_written_over) n += "_params_over";
  return n;
}

std::vector<GradientSet> gradient_sets() {
  return {{true, true, true, false},       {false, true, true, false},       {true, false, true, false},
          {true, true, false, false},      {false, false, true, false},      {true, true, true, true},
          {true, true, true, false, true}, {false, false, true, false, true}};
}

FusedResults run_fused(const FusedInputs& in, const GradientSet& g, Device device) {
  const int64_t N = in.a.dim(0), C = in.a.dim(1);
  FusedResults r;
  r.residual = Tensor::empty({N, C}, DType::F32, device);
  r.out = Tensor::empty({N, C}, DType::F32, device);
  r.mean = Tensor::empty({N}, DType::F32, device);
  r.rstd = Tensor::empty({N}, DType::F32, device);
  ch06::fused_residual_layernorm_forward(r.residual, r.out, r.mean, r.rstd, in.a.to(device), in.b.to(device),
                                         in.weight.to(device), in.bias.to(device));
  const Tensor dresidual = g.dresidual ? in.dresidual.to(device) : Tensor();
  if (g.da) r.da = g.da_is_dresidual ? dresidual : in.da.to(device);
  if (g.db) r.db = in.db.to(device);
  r.dweight = g.params_written_over ? poisoned({C}, device) : in.dweight.to(device);
  r.dbias = g.params_written_over ? poisoned({C}, device) : in.dbias.to(device);
  ch06::fused_residual_layernorm_backward(r.da, r.db, r.dweight, r.dbias, dresidual, in.dout.to(device), r.residual,
                                          in.weight.to(device), r.mean, r.rstd,
                                          g.params_written_over ? ops::GradWrite::Overwrite : ops::GradWrite::Add);
  return r;
}

FusedResults run_unfused_reference(const FusedInputs& in, const GradientSet& g) {
  const int64_t N = in.a.dim(0), C = in.a.dim(1);
  FusedResults r;
  r.residual = Tensor::empty({N, C}, DType::F32);
  r.out = Tensor::empty({N, C}, DType::F32);
  r.mean = Tensor::empty({N}, DType::F32);
  r.rstd = Tensor::empty({N}, DType::F32);
  ops::cpu::residual_forward(r.residual, in.a, in.b);
  ops::cpu::layernorm_forward(r.out, r.mean, r.rstd, r.residual, in.weight, in.bias);
  const Tensor total = g.dresidual ? in.dresidual.clone() : Tensor::zeros({N, C}, DType::F32);
  r.dweight = g.params_written_over ? Tensor::zeros({C}, DType::F32) : in.dweight.clone();
  r.dbias = g.params_written_over ? Tensor::zeros({C}, DType::F32) : in.dbias.clone();
  ops::cpu::layernorm_backward(total, r.dweight, r.dbias, in.dout, r.residual, in.weight, r.mean, r.rstd,
                               ops::GradWrite::Add, ops::GradWrite::Add);
  // da aliasing dresidual starts from dresidual's values, as the fused op's da then does.
  if (g.da) r.da = g.da_is_dresidual ? in.dresidual.clone() : in.da.clone();
  if (g.db) r.db = in.db.clone();
  ops::cpu::residual_backward(r.da, r.db, total);
  return r;
}

void expect_results_close(const FusedResults& actual, const FusedResults& expected, Tolerance tol) {
  const std::pair<const char*, std::pair<Tensor, Tensor>> results[] = {
      {"residual", {actual.residual, expected.residual}},
      {"out", {actual.out, expected.out}},
      {"mean", {actual.mean, expected.mean}},
      {"rstd", {actual.rstd, expected.rstd}},
      {"da", {actual.da, expected.da}},
      {"db", {actual.db, expected.db}},
      {"dweight", {actual.dweight, expected.dweight}},
      {"dbias", {actual.dbias, expected.dbias}}};
  for (const auto& [name, pair] : results) {
    ASSERT_EQ(pair.first.defined(), pair.second.defined()) << name;
    if (!pair.first.defined()) continue;
    const CloseReport report = compare_close(pair.first, pair.second, tol);
    EXPECT_TRUE(report.ok()) << report.describe(name);
  }
}

void expect_no_rows_give_zero_param_grads(Device device) {
  Rng rng(29);
  const int64_t C = 24;
  const Tensor weight = random_normal({C}, rng).to(device), none = Tensor::empty({0}, DType::F32, device);
  for (const DType dtype : {DType::F32, DType::BF16}) {
    const Tensor rows = Tensor::empty({0, C}, dtype, device);
    const Tensor dweight = poisoned({C}, device), dbias = poisoned({C}, device);
    if (dtype == DType::F32)
      ch06::fused_residual_layernorm_backward(rows, rows, dweight, dbias, rows, rows, rows, weight, none, none,
                                              ops::GradWrite::Overwrite);
    else
      ch06::fused_residual_layernorm_backward_through(rows, ops::GradWrite::Overwrite, Tensor(), dweight, dbias, rows,
                                                      rows, weight, none, none, ops::GradWrite::Overwrite);
    EXPECT_EQ(dweight.to_floats(), std::vector<float>(C, 0.0f)) << dtype_name(dtype);
    EXPECT_EQ(dbias.to_floats(), std::vector<float>(C, 0.0f)) << dtype_name(dtype);
  }
}

}  // namespace lab::test
