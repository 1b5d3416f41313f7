// The step profile (common/core/step_profile.h): every op dispatched while it is open is counted under its name,
// nothing before or after; one profile at a time; the finishers run once, at close; the table lists every row
// with its calls; zero-fills are counted apart, with their bytes.
#include <gtest/gtest.h>

#include <vector>

#include "common/core/step_profile.h"
#include "common/core/tensor.h"
#include "common/ops/gelu.h"
#include "common/ops/reduce.h"
#include "common/ops/residual.h"

namespace lab {
namespace {

TEST(StepProfile, CountsTheOpsDispatchedWhileOpen) {
  const Tensor x = Tensor::from_floats(std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f}, {4});
  const Tensor y = Tensor::empty({4}, DType::F32);
  ops::gelu_forward(y, x);  // before: not counted
  int finished = 0;
  StepProfile profile;
  EXPECT_EQ(StepProfile::open_profile(), &profile);
  profile.at_close([&finished](StepProfile&) { ++finished; });
  for (int i = 0; i < 3; ++i) ops::gelu_forward(y, x);
  ops::residual_forward(y, x, x);
  ops::sum_squares(x);
  profile.close();
  ops::gelu_forward(y, x);  // after: not counted
  profile.close();          // a second close does nothing
  EXPECT_EQ(StepProfile::open_profile(), nullptr);
  EXPECT_EQ(finished, 1);

  EXPECT_EQ(profile.calls(ProfileKind::Op), 5);
  EXPECT_EQ(profile.calls(ProfileKind::Kernel), 0);  // the CPU launches no kernel
  int64_t gelu = 0, residual = 0, sum_squares = 0;
  for (const ProfileRow& row : profile.rows(ProfileKind::Op)) {
    EXPECT_GE(row.seconds, 0.0);
    if (row.name == "gelu_forward") gelu = row.calls;
    if (row.name == "residual_forward") residual = row.calls;
    if (row.name == "sum_squares") sum_squares = row.calls;
  }
  EXPECT_EQ(gelu, 3);
  EXPECT_EQ(residual, 1);
  EXPECT_EQ(sum_squares, 1);
  const std::string table = profile.table(ProfileKind::Op);
  for (const char* part : {"gelu_forward", "residual_forward", "sum_squares", "calls", "total"})
    EXPECT_NE(table.find(part), std::string::npos) << part << " in:\n" << table;
}

TEST(StepProfile, CountsZeroFillsAndTheirBytesApart) {
  const Tensor x = Tensor::empty({5, 3}, DType::F32);
  x.zero_();  // before: not counted
  StepProfile profile;
  x.zero_();
  const Tensor y = Tensor::zeros({7}, DType::BF16);
  x.slice_rows(1, 3).zero_();
  profile.close();
  x.zero_();  // after: not counted
  EXPECT_EQ(profile.zero_fills().count, 3);
  EXPECT_EQ(profile.zero_fills().bytes, 5 * 3 * 4 + 7 * 2 + 2 * 3 * 4);
  EXPECT_EQ(profile.calls(ProfileKind::Op), 0);  // a fill is no op
  EXPECT_EQ(ZeroFills({3, 1300000}).line(), "3 zero-fills, 1.3 MB");
}

TEST(StepProfile, OneAtATime) {
  StepProfile first;
  EXPECT_THROW(StepProfile second, Error);
  first.close();
  StepProfile third;  // the first is closed: a new one may open
  EXPECT_EQ(StepProfile::open_profile(), &third);
}

}  // namespace
}  // namespace lab
