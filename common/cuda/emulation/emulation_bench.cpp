// What the emulator costs (Google Benchmark): a fiber switch, a block barrier and a warp shuffle per CUDA
// thread, the launch of an empty kernel, an elementwise kernel's throughput against the same loop in plain
// C++, and the cuBLAS stand-in's SGEMM rate. The numbers in README.md come from this program.
//
// The emulator's work runs on its stream and worker threads, so the benchmarks that launch work measure the
// CPU time of the whole process: rates are per CPU-second, which a busy machine (other processes taking
// turns on the cores) changes much less than wall time. "Time" is still the wall time of an iteration.
//
//   build/bin/cuda_emulation_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/cuda/emulation/fiber.h"
#include "common/cuda/emulation/kernel_launch.h"
#include "common/cuda/emulation/settings.h"

namespace lab::cuda::emu {
namespace {

void check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
  std::exit(1);
}

template <typename T>
T* device_array(size_t n, T value) {
  T* p = nullptr;
  check(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
  const std::vector<T> host(n, value);
  check(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return p;
}

// ---------------------------------------------------------------- a fiber switch

struct PingPong {
  Fiber main;  // the benchmark's own stack
  Fiber fiber;
  bool stop = false;
};

void ping_pong(void* arg) {
  auto& p = *static_cast<PingPong*>(arg);
  while (!p.stop) Fiber::switch_to(p.fiber, p.main);
}

// One iteration is two switches: into the fiber and back.
void BM_FiberSwitch(benchmark::State& state) {
  FiberStack stack(settings().fiber_stack_bytes);
  PingPong p;
  p.fiber.start(stack, ping_pong, &p, false, p.main);
  for (auto _ : state) Fiber::switch_to(p.main, p.fiber);
  p.stop = true;
  Fiber::switch_to(p.main, p.fiber);
  state.SetItemsProcessed(2 * state.iterations());
  state.SetLabel("items = switches");
}
BENCHMARK(BM_FiberSwitch);

// ---------------------------------------------------------------- barriers, shuffles, launches

constexpr int kRounds = 64;

__global__ void barrier_kernel(int* out) {
  int v = static_cast<int>(threadIdx.x);
  for (int i = 0; i < kRounds; ++i) {
    __syncthreads();
    v += i;
  }
  if (v < 0) out[0] = v;
}

__global__ void shuffle_kernel(float* out) {
  float v = static_cast<float>(threadIdx.x);
  for (int i = 0; i < kRounds; ++i) v += __shfl_xor_sync(0xffffffffu, v, i % 32);
  if (v < 0.0f) out[0] = v;
}

__global__ void empty_kernel(int* /*out*/) {}

// items = CUDA threads x rounds: the cost of one thread passing one barrier (or one shuffle).
template <typename T>
void run_rounds(benchmark::State& state, void (*kernel)(T*)) {
  const int threads = static_cast<int>(state.range(0));
  T* out = device_array<T>(1, T{});
  for (auto _ : state) {
    launch_kernel("bench", kernel, 64, threads, 0, nullptr, out);
    check(cudaDeviceSynchronize(), "kernel");
  }
  state.SetItemsProcessed(state.iterations() * 64 * threads * kRounds);
  cudaFree(out);
}

void BM_SyncThreads(benchmark::State& state) {
  run_rounds(state, barrier_kernel);
}
BENCHMARK(BM_SyncThreads)->Arg(256)->Arg(1024)->MeasureProcessCPUTime();

void BM_ShuffleXor(benchmark::State& state) {
  run_rounds(state, shuffle_kernel);
}
BENCHMARK(BM_ShuffleXor)->Arg(256)->MeasureProcessCPUTime();

// A launch of one small block and the wait for it.
void BM_LaunchAndSynchronize(benchmark::State& state) {
  int* out = device_array<int>(1, 0);
  for (auto _ : state) {
    launch_kernel("empty_kernel", empty_kernel, 1, 32, 0, nullptr, out);
    check(cudaDeviceSynchronize(), "kernel");
  }
  cudaFree(out);
}
BENCHMARK(BM_LaunchAndSynchronize)->MeasureProcessCPUTime();

// ---------------------------------------------------------------- an elementwise kernel

float gelu(float v) {
  return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

__global__ void gelu_kernel(float* out, const float* x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = gelu(x[i]);
}

constexpr int64_t kElements = int64_t{1} << 22;

void BM_GeluKernel(benchmark::State& state) {
  float* x = device_array<float>(kElements, 0.5f);
  float* out = device_array<float>(kElements, 0.0f);
  const unsigned blocks = static_cast<unsigned>((kElements + 255) / 256);
  for (auto _ : state) {
    launch_kernel("gelu_kernel", gelu_kernel, blocks, 256, 0, nullptr, out, x, kElements);
    check(cudaDeviceSynchronize(), "kernel");
  }
  state.SetItemsProcessed(state.iterations() * kElements);
  cudaFree(x);
  cudaFree(out);
}
BENCHMARK(BM_GeluKernel)->MeasureProcessCPUTime();

// The same work as a plain loop on one thread: what the kernel would cost without the emulation.
void BM_GeluLoop(benchmark::State& state) {
  std::vector<float> x(kElements, 0.5f), out(kElements);
  for (auto _ : state) {
    for (int64_t i = 0; i < kElements; ++i) out[static_cast<size_t>(i)] = gelu(x[static_cast<size_t>(i)]);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kElements);
}
BENCHMARK(BM_GeluLoop)->MeasureProcessCPUTime();

// ---------------------------------------------------------------- SGEMM

void BM_Sgemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool tf32 = state.range(1) != 0;
  float* a = device_array<float>(static_cast<size_t>(n) * n, 0.25f);
  float* b = device_array<float>(static_cast<size_t>(n) * n, 0.5f);
  float* c = device_array<float>(static_cast<size_t>(n) * n, 0.0f);
  cublasHandle_t handle = nullptr;
  cublasCreate(&handle);
  cublasSetMathMode(handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  const float one = 1.0f, zero = 0.0f;
  for (auto _ : state) {
    cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
    check(cudaDeviceSynchronize(), "sgemm");
  }
  state.counters["GFLOP/CPU-s"] =
      benchmark::Counter(2.0 * n * n * n * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}
BENCHMARK(BM_Sgemm)->Args({512, 0})->Args({1024, 0})->Args({1024, 1})->MeasureProcessCPUTime();

}  // namespace
}  // namespace lab::cuda::emu

BENCHMARK_MAIN();
