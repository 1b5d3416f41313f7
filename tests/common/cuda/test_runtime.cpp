// The CUDA runtime surface: device queries, the device guard, and the byte movers the core uses
// (synchronous copies in every direction, memset), seen through Tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "common/core/tensor.h"
#include "common/cuda/cublas.h"
#include "common/cuda/runtime.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using test::kGpu;

std::vector<float> iota_floats(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Runs on every machine: asking for a GPU that is not there is one clear error, with or without a driver.
TEST(CudaRuntime, MissingDeviceIsAClearError) {
  const int count = cuda::device_count();  // never throws, 0 without a driver
  EXPECT_GE(count, 0);
  EXPECT_EQ(cuda_available(), count > 0);
  const std::string device = cat("cuda:", count);
  testing::expect_error([&] { cuda::check_device_index(count); }, ErrorKind::InvalidArgument, {device, "requested"});
  testing::expect_error([&] { Tensor::empty({4}, DType::F32, Device::cuda(count)); }, ErrorKind::InvalidArgument,
                        {device});
  testing::expect_error([&] { cuda::check_device_index(-1); }, ErrorKind::InvalidArgument, {"cuda:-1"});
}

TEST(CudaRuntime, DescribesTheDevice) {
  LAB_REQUIRE_GPU();
  EXPECT_GE(cuda::device_count(), 1);
  EXPECT_FALSE(cuda::device_name(0).empty());
  EXPECT_GT(cuda::driver_version(), 0);
  EXPECT_GT(cuda::runtime_version(), 0);
  EXPECT_NO_THROW(cuda::synchronize());
}

TEST(CudaRuntime, DeviceGuardRestoresTheCurrentDevice) {
  LAB_REQUIRE_GPU();
  cuda::set_device(0);
  const int last = cuda::device_count() - 1;
  {
    cuda::DeviceGuard guard(last);
    EXPECT_EQ(cuda::current_device(), last);
  }
  EXPECT_EQ(cuda::current_device(), 0);
}

TEST(CudaRuntime, CopiesRoundTripInEveryDirection) {
  LAB_REQUIRE_GPU();
  for (const size_t n : {size_t{1}, size_t{1001}, size_t{1} << 20}) {
    const std::vector<float> host = iota_floats(n, 0.5f);
    const Tensor on_device = Tensor::from_floats(host, {static_cast<int64_t>(n)}, kGpu);  // host -> device
    const Tensor copy = on_device.clone();                                                // device -> device
    EXPECT_NE(copy.raw(), on_device.raw());
    EXPECT_EQ(copy.to_floats(), host) << n << " floats";  // device -> host
  }
}

TEST(CudaRuntime, CopyFromAndZeroWorkOnViews) {
  LAB_REQUIRE_GPU();
  const std::vector<float> host = iota_floats(12, 1.0f);
  const Tensor t = Tensor::from_floats(host, {3, 4}, kGpu);
  t.slice_rows(1, 2).zero_();  // the middle row only, on the current stream
  std::vector<float> expected = host;
  std::fill(expected.begin() + 4, expected.begin() + 8, 0.0f);
  EXPECT_EQ(t.to_floats(), expected);

  const Tensor row = Tensor::from_floats(std::vector<float>{9, 8, 7, 6}, {4}, kGpu);
  t.slice_rows(2, 3).copy_from(row);  // device -> device into a view
  const std::vector<float> row_values = row.to_floats();
  std::copy(row_values.begin(), row_values.end(), expected.begin() + 8);
  EXPECT_EQ(t.to_floats(), expected);
  EXPECT_EQ(Tensor::zeros({5}, DType::F32, kGpu).to_floats(), std::vector<float>(5, 0.0f));
}

TEST(CudaRuntime, IntegerTensorsRoundTrip) {
  LAB_REQUIRE_GPU();
  const std::vector<int32_t> ids = {0, 50256, -3, 7};
  EXPECT_EQ(Tensor::from_ints(ids, {4}, kGpu).to_ints(), ids);
}

// Tests that need two GPUs. The emulation build also runs them with two emulated GPUs (LAB_EMU_DEVICES=2,
// tests/common/cuda/CMakeLists.txt).
class CudaTwoGpus : public ::testing::Test {
 protected:
  void SetUp() override {
    LAB_REQUIRE_GPU();
    if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  }
};

TEST_F(CudaTwoGpus, CopiesBetweenTheGpus) {
  const std::vector<float> host = iota_floats(4097, -2.0f);
  const Tensor on_first = Tensor::from_floats(host, {4097}, Device::cuda(0));
  const Tensor on_second = on_first.to(Device::cuda(1));
  EXPECT_EQ(on_second.device(), Device::cuda(1));
  EXPECT_EQ(on_second.to_floats(), host);
}

// Naming a device in synchronize() or set_tf32() must not change which device is current for the ops that
// follow on this thread.
TEST_F(CudaTwoGpus, SynchronizeAndTf32KeepTheCurrentDevice) {
  cuda::set_device(1);
  synchronize(Device::cuda(0));
  EXPECT_EQ(cuda::current_device(), 1) << "synchronize(cuda:0) switched the current device";
  const bool tf32 = cuda::tf32_enabled();
  set_tf32(Device::cuda(0), !tf32);
  EXPECT_EQ(cuda::current_device(), 1) << "set_tf32(cuda:0) switched the current device";
  EXPECT_EQ(cuda::tf32_enabled(), !tf32);
  set_tf32(Device::cuda(0), tf32);
  cuda::set_device(0);
}

}  // namespace
}  // namespace lab
