// The kernel lab's CUDA path: CUDA-event timing of work queued on the device, the L2 flush buffer, and a lab
// whose CUDA versions are validated against the CPU reference (a deliberately wrong one fails) and timed. In
// the emulation build the same code runs and every time is marked "emulated" and compared with no GPU peak.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "common/cuda/check.h"
#include "common/cuda/stream.h"
#include "common/lab/device_timing.h"
#include "common/lab/kernel_lab.h"
#include "common/ops/gelu.h"
#include "common/util/rng.h"
#include "tests/common/cuda/gpu_test.h"

namespace lab::kernel_lab {
namespace {

using test::kGpu;

#ifdef LAB_CUDA_EMULATION
constexpr const char* kCudaTiming = "emulated";
#else
constexpr const char* kCudaTiming = "cuda_events";
#endif

void sleep_50ms(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

TEST(CudaEventTiming, TimesTheWorkQueuedOnTheDeviceNotTheCall) {
  LAB_REQUIRE_GPU();
  const std::unique_ptr<bench::TimingBackend> timing = timing_for(kGpu, {.flush_l2 = false});
  EXPECT_EQ(timing->name(), kCudaTiming);
  // The call only queues 50 ms of stream work and returns: the events around it see the 50 ms.
  const double seconds =
      timing->time([] { CUDA_CHECK(cudaLaunchHostFunc(cuda::current_stream(kGpu.index), sleep_50ms, nullptr)); });
  EXPECT_GE(seconds, 0.045);
  EXPECT_LT(seconds, 5.0);
}

TEST(CudaEventTiming, TheL2FlushBufferIsLargerThanTheL2) {
  LAB_REQUIRE_GPU();
  int l2_bytes = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, kGpu.index));
  size_t free_before = 0, free_with = 0, total = 0;
  synchronize(kGpu);
  CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  {
    const std::unique_ptr<bench::TimingBackend> timing = timing_for(kGpu, {.flush_l2 = true});
    CUDA_CHECK(cudaMemGetInfo(&free_with, &total));
    EXPECT_GE(free_before - free_with, std::max<size_t>(size_t{128} << 20, 2 * static_cast<size_t>(l2_bytes)));
    const double seconds = timing->time([] {});
    EXPECT_GE(seconds, 0.0);
  }
}

// GELU over n elements: the CPU reference, the CUDA op, and a CUDA version with a bound bug (half the elements).
struct GeluProblem {
  static constexpr int64_t n = 1 << 16;
  Tensor x_cpu, expected, x_gpu, out_cpu, out_gpu;

  GeluProblem() {
    Rng rng(4);
    std::vector<float> values(n);
    for (float& v : values) v = rng.normal(0.0f, 3.0f);
    x_cpu = Tensor::from_floats(values, {n});
    expected = Tensor::empty({n}, DType::F32);
    ops::cpu::gelu_forward(expected, x_cpu);
    x_gpu = x_cpu.to(kGpu);
    out_cpu = Tensor::empty({n}, DType::F32);
    out_gpu = Tensor::empty({n}, DType::F32, kGpu);
  }

  Version version(std::string name, Device device, std::function<void()> run) {
    const Tensor out = device.is_cpu() ? out_cpu : out_gpu;
    return {std::move(name), "", device, bench::Precision::FP32, run, [this, out, run] {
              out.copy_from(poisoned({n}, out.device()));
              run();
              return std::vector<Check>{Check::close("gelu", out, expected, tolerance_for(DType::F32, 1))};
            }};
  }
};

TEST(KernelLabOnCuda, CudaVersionsAreValidatedAgainstTheCpuAndTimedWithEvents) {
  LAB_REQUIRE_GPU();
  GeluProblem p;
  KernelLab lab("gelu_forward", "n=65536", {8.0 * GeluProblem::n, 8.0 * GeluProblem::n});
  lab.add(p.version("CPU reference", Device::cpu(), [&] { ops::cpu::gelu_forward(p.out_cpu, p.x_cpu); }));
  lab.add(p.version("CUDA op", kGpu, [&] { ops::cuda::gelu_forward(p.out_gpu, p.x_gpu); }));
  lab.add(p.version("first half only", kGpu, [&] {
    ops::cuda::gelu_forward(p.out_gpu.view(0, {GeluProblem::n / 2}), p.x_gpu.view(0, {GeluProblem::n / 2}));
  }));
  MeasureOptions options;
  options.warmup = 1;
  options.repeats = 3;
  options.cpu_ceiling = false;
  const std::vector<VersionReport> r = lab.measure(options);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].timed) << r[0].validation.describe();
  EXPECT_EQ(r[0].timing, "steady_clock");
  EXPECT_TRUE(r[1].timed) << r[1].validation.describe();
  EXPECT_EQ(r[1].timing, kCudaTiming);
  EXPECT_GT(r[1].ms.median, 0.0);
  EXPECT_FALSE(r[1].speedup_vs_previous.has_value());  // CPU and CUDA times are not compared
  EXPECT_FALSE(r[2].timed);
  EXPECT_NE(r[2].validation.describe().find("32768 of 65536 elements differ"), std::string::npos)
      << r[2].validation.describe();
  EXPECT_NE(r[2].validation.describe().find("[32768] nan"), std::string::npos) << r[2].validation.describe();
#ifdef LAB_CUDA_EMULATION
  EXPECT_FALSE(r[1].ceiling.has_value());  // emulated times are never a fraction of a GPU's peak
  EXPECT_NE(lab.table(r).find("emulated: the CUDA versions ran in the CUDA emulation build"), std::string::npos);
#endif
}

}  // namespace
}  // namespace lab::kernel_lab
