// Tensor, dtype conversions and the CPU allocator's accounting.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/core/cpu_allocator.h"
#include "common/core/tensor.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::expect_error;

TEST(Tensor, ViewsShareStorageAndCheckBounds) {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  Tensor t = Tensor::from_floats(v, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dim(-1), 4);
  Tensor r = t.reshape({6, -1});
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  Tensor rows = r.slice_rows(2, 4);
  EXPECT_EQ(rows.to_floats(), std::vector<float>({8, 9, 10, 11, 12, 13, 14, 15}));
  rows.fill_(-1.0f);
  EXPECT_EQ(t.to_floats()[8], -1.0f);  // same storage
  EXPECT_EQ(t.view(20, {4}).to_floats(), std::vector<float>({20, 21, 22, 23}));
  expect_error([&] { t.reshape({5, 5}); }, ErrorKind::InvalidArgument, {"[2, 3, 4]", "[5, 5]"});
  expect_error([&] { t.view(21, {4}); }, ErrorKind::InvalidArgument, {"offset 21"});
  expect_error([&] { r.slice_rows(3, 7); }, ErrorKind::InvalidArgument, {"slice_rows(3, 7)"});
  expect_error([&] { t.data<int32_t>(); }, ErrorKind::InvalidArgument, {"expected dtype i32, found f32"});
  expect_error([&] { Tensor().raw(); }, ErrorKind::InvalidArgument, {"undefined"});
}

TEST(Tensor, CopiesAreDeepAndDeviceErrorsAreClear) {
  Tensor a = Tensor::from_floats(std::vector<float>{1, 2, 3}, {3});
  Tensor b = a.clone();
  b.fill_(7.0f);
  EXPECT_EQ(a.to_floats(), std::vector<float>({1, 2, 3}));
  a.copy_from(b);
  EXPECT_EQ(a.to_floats(), std::vector<float>({7, 7, 7}));
  expect_error([&] { a.copy_from(Tensor::zeros({4}, DType::F32)); }, ErrorKind::InvalidArgument, {"copy_from"});
  if (!cuda_available()) {
    // A CPU-only build cannot allocate on a GPU (Unsupported); a CUDA build on a machine without one has
    // no device 0 to allocate on (InvalidArgument). Either way: one clear error, no crash.
    try {
      a.to(Device::cuda(0));
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_TRUE(e.kind() == ErrorKind::Unsupported || e.kind() == ErrorKind::InvalidArgument) << e.what();
    }
  }
}

TEST(DType, Bf16AndF16RoundToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits_to_float(0x3f80), 1.0f);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties to even (down to 1.0).
  EXPECT_EQ(float_to_bf16_bits(1.0f + 1.0f / 256), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
  // Values that f16 represents exactly survive the round trip unchanged.
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f /*smallest normal*/,
                  5.960464477539063e-08f /*smallest subnormal*/, 1234.0f, 0.333251953125f})
    EXPECT_EQ(f16_bits_to_float(float_to_f16_bits(x)), x) << x;
  EXPECT_EQ(float_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(float_to_f16_bits(5.960464477539063e-08f), 0x0001);
  EXPECT_EQ(float_to_f16_bits(2.98023223876953125e-08f), 0x0000);  // exactly half the smallest: ties to even
  EXPECT_EQ(f16_bits_to_float(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(f16_bits_to_float(0x3555), 0.333251953125f);
  EXPECT_NEAR(f16_bits_to_float(float_to_f16_bits(0.1f)), 0.1f, 0.1f * 1e-3f);
  Tensor t = Tensor::from_floats(std::vector<float>{0.5f, -3.0f}, {2});
  EXPECT_EQ(t.to_dtype(DType::BF16).to_floats(), t.to_floats());
  EXPECT_EQ(t.to_dtype(DType::F16).to_floats(), t.to_floats());
  EXPECT_EQ(parse_dtype("bf16"), DType::BF16);
  expect_error([] { parse_dtype("f64"); }, ErrorKind::InvalidArgument, {"f64"});
}

TEST(CpuAllocator, CountsLiveAndPeakByCategory) {
  const MemoryStats before = memory_stats(Device::cpu());
  {
    MemoryScope scope(MemCategory::Workspace);
    Tensor a = Tensor::empty({1000}, DType::F32);
    Tensor b = Tensor::empty({3000}, DType::F32);
    const MemoryStats during = memory_stats(Device::cpu());
    EXPECT_EQ(during.live_of(MemCategory::Workspace) - before.live_of(MemCategory::Workspace), 16000);
    {
      MemoryScope inner(MemCategory::Comm);
      Tensor c = Tensor::empty({10}, DType::I32);
      EXPECT_EQ(memory_stats(Device::cpu()).live_of(MemCategory::Comm) - before.live_of(MemCategory::Comm), 40);
    }
    EXPECT_EQ(current_mem_category(), MemCategory::Workspace);
  }
  const MemoryStats after = memory_stats(Device::cpu());
  EXPECT_EQ(after.live_of(MemCategory::Workspace), before.live_of(MemCategory::Workspace));
  EXPECT_GE(after.peak_of(MemCategory::Workspace) - before.live_of(MemCategory::Workspace), 16000);
  EXPECT_GE(after.reserved, after.live_total);
  EXPECT_NE(after.table().find("workspace"), std::string::npos);
}

TEST(CpuAllocator, ReusesFreedBlocks) {
  MemoryScope scope(MemCategory::Workspace);
  const void* first;
  { first = Tensor::empty({123457}, DType::F32).raw(); }
  const int64_t calls = memory_stats(Device::cpu()).system_allocs;
  const void* second = Tensor::empty({123457}, DType::F32).raw();
  EXPECT_EQ(first, second);
  EXPECT_EQ(memory_stats(Device::cpu()).system_allocs, calls);
}

TEST(CpuAllocator, SizeClasses) {
  EXPECT_EQ(cpu_size_class(1), 64u);
  EXPECT_EQ(cpu_size_class(4096), 4096u);
  EXPECT_EQ(cpu_size_class(4097), 5120u);
  EXPECT_EQ(cpu_size_class((size_t{1} << 20) + 1), size_t{2} << 20);
  for (size_t b : {size_t{100}, size_t{70000}, size_t{5} << 20, size_t{123456789}}) {
    EXPECT_GE(cpu_size_class(b), b);
    EXPECT_LE(cpu_size_class(b), b + b / 4 + 64);
  }
}

}  // namespace
}  // namespace lab
