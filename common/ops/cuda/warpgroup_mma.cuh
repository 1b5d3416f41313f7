// Hopper's warpgroup tensor-core products (sm_90a), one instruction at a time, with every operand's place known:
// wgmma.mma_async m64nNk16 (the 128 threads of a warpgroup, 4 consecutive warps, compute D[64, N] = A[64, 16]
// B[16, N] + D, 16-bit inputs, f32 accumulation), A from shared memory or from registers, B from shared memory,
// both named by a 64-bit matrix descriptor; and the fence, commit and wait that order them. warp_mma.cuh does the
// same for mma.sync, whose fragments these share.
//
// Registers (PTX ISA, "Register Fragments", wgmma .m64nNk16), for warp w of the warpgroup and lane = 4 g + t:
//   A (register form), a[4]: rows 16 w .. 16 w + 15 of A, each warp as mma.sync's A fragment (warp_mma.cuh).
//   D, float d[N / 8][4]: n8 block i of rows 16 w .. 16 w + 15, as mma.sync's C fragment: d[i][0], d[i][1] =
//   D[16 w + g][8 i + 2 t, + 1], d[i][2], d[i][3] = D[16 w + g + 8][8 i + 2 t, + 1]. So a warp's share of a
//   wgmma accumulator is, register for register, the C fragments of the mma.sync kernels' strip of 16 rows.
//
// Shared memory (PTX ISA, "Shared Memory Matrix Layout", the layout without swizzling, which is all this header
// uses): a matrix is made of core matrices of 8 rows x 16 bytes (8 16-bit elements), each 128 contiguous bytes, row
// after row. In element coordinates (CuTe's canonical layouts, T = 8 elements of 16 bits):
//   K-major (A [M, K], or B given as [N, K]: A Q tile, a K tile): element (row, k) at
//     (row % 8) * 16 + (row / 8) * SBO + (k % 8) * 2 + (k / 8) * LBO bytes;
//   MN-major (B given as [K, N]: a V tile), element (k, n) at
//     (n % 8) * 2 + (n / 8) * SBO + (k % 8) * 16 + (k / 8) * LBO bytes;
// LBO ("leading dimension byte offset") and SBO ("stride dimension byte offset") are the descriptor's two strides.
// The descriptor (PTX ISA, "Matrix Descriptor Format"): bits 0-13 the start address, 16-29 LBO, 32-45 SBO, each
// (x & 0x3FFFF) >> 4; bits 49-51 a base offset and 62-63 the swizzle mode, both 0 here.
//
// Order. mma_async only queues the product: its A registers and accumulators belong to the tensor cores until a
// wait_group covers it. fence() (wgmma.fence) must come before the first product that reads registers the thread
// wrote since; commit() closes a group of queued products; wait<P>() returns once at most P groups are still in
// flight. fence_operand() keeps the compiler from moving reads of an accumulator above the wait that makes it
// valid (the asm statements of the products say nothing of that), and, before a fence, the writes of an accumulator
// or an A fragment below it. Shared memory written by the threads (stores,
// cp.async) reaches the tensor cores through another proxy: fence_shared_writes() (fence.proxy.async) after the
// writes and before the barrier that precedes the products.
//
// Under LAB_CUDA_EMULATION a product is queued, not done: the thread's Warpgroup holds it, and the wait that
// covers it is one warp task (as mma.sync's emulation is) in which the last lane to arrive reads A, B and C from
// the lanes' registers and the block's shared memory by the layouts above, to the letter, and writes D back. So
// reading an accumulator before its wait reads stale values, and overwriting an A register or a shared tile before
// it reads the new ones, as a GPU may; a product issued without a fence since the last wait, lanes of a warp that
// queue different products, a descriptor with swizzling, or an operand outside the block's dynamic shared memory
// fault. Each output is summed in k order with one f32 FMA a product. Not modelled: the warpgroup's four warps
// taking part and executing the same instruction (.aligned: a product in a branch that the warps take differently
// is undefined on a GPU; here each warp's rows are computed from its own lanes), so a kernel keeps every path to a
// product uniform across its warpgroup by construction; and fence_shared_writes (a no-op here).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/ops/cuda/warp_mma.cuh"

#ifdef LAB_CUDA_EMULATION
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>
#endif

namespace lab::ops::cuda::wgmma {

inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kCoreMatrixBytes = 128;  // 8 rows of 16 bytes

// Which dimension of B is contiguous in a core matrix's rows: K (B stored as [N, K], imm-trans-b 0) or N (stored as
// [K, N], imm-trans-b 1).
enum class BMajor { K = 0, N = 1 };

// The 14-bit field of a descriptor for an address or a stride in bytes.
__device__ inline uint64_t descriptor_field(uint32_t bytes) {
  return static_cast<uint64_t>((bytes & 0x3FFFFu) >> 4);
}

#ifdef LAB_CUDA_EMULATION

// The address a descriptor holds: the byte offset in the block's dynamic shared memory (a GPU's is its offset in
// the shared window; kernels take it from shared_address and never look at its value). Past 2^18 bytes, or outside
// the block's shared memory, it becomes an address no block has, which the product's wait faults on.
inline uint32_t shared_address(const void* p) {
  const auto* base = static_cast<const unsigned char*>(lab::cuda::emu::device::dynamic_shared_memory());
  const auto* q = static_cast<const unsigned char*>(p);
  if (q < base || q >= base + lab::cuda::emu::device::dynamic_shared_bytes()) return 0x3FFF0u;
  return static_cast<uint32_t>(q - base);
}

#else

__device__ inline uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#endif

// Whether the current device runs code built for sm_90a: compute capability 9.0 exactly (the emulator's devices are).
// A caller also needs its own code built for sm_90a (the emulation build, or a target of lab_target_sm90a).
inline bool device_runs_sm90a() {
  int device = 0, major = 0, minor = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess && major == 9 &&
         minor == 0;
}

// The descriptor of a matrix without swizzling at `shared` (16-byte aligned), strides in bytes.
__device__ inline uint64_t descriptor(const void* shared, uint32_t leading_bytes, uint32_t stride_bytes) {
  return descriptor_field(shared_address(shared)) | descriptor_field(leading_bytes) << 16 |
         descriptor_field(stride_bytes) << 32;
}

#ifdef LAB_CUDA_EMULATION

// ---------------------------------------------------------------- emulation: products queued until their wait

namespace detail {

inline constexpr unsigned int kAllLanes = 0xffffffffu;

// One queued product, as one lane issued it.
struct Queued {
  int n;             // N of m64nNk16
  bool f16;          // the inputs' type: f16, else bf16
  bool a_in_shared;  // A by descriptor, else by this lane's registers
  BMajor b_major;
  uint64_t desc_a, desc_b;
  const uint32_t* a;  // the lane's A registers (register form)
  float* d;           // the lane's accumulator, N / 2 floats
  bool accumulate;    // scale-d: D = A B + D, else D = A B
  bool fenced;        // a fence came after the lane's last wait
  uint64_t group;     // the commit group it belongs to
};

struct Operand {
  const unsigned char* base;
  uint32_t leading, stride;
};

inline Operand decode(uint64_t desc, const char* which) {
  if ((desc >> 62) != 0)
    throw std::runtime_error(std::string("wgmma: the ") + which +
                             " descriptor asks for swizzling; the emulator models the layout without it only");
  const auto* shared = static_cast<const unsigned char*>(lab::cuda::emu::device::dynamic_shared_memory());
  return {shared + ((desc & 0x3FFFu) << 4), static_cast<uint32_t>(((desc >> 16) & 0x3FFFu) << 4),
          static_cast<uint32_t>(((desc >> 32) & 0x3FFFu) << 4)};
}

// The 16-bit element at byte offset `offset` of an operand, checked to lie in the block's shared memory.
inline float element(const Operand& m, size_t offset, bool f16, const char* which) {
  const auto* shared = static_cast<const unsigned char*>(lab::cuda::emu::device::dynamic_shared_memory());
  const unsigned char* p = m.base + offset;
  if (p < shared || p + 2 > shared + lab::cuda::emu::device::dynamic_shared_bytes())
    throw std::runtime_error(std::string("wgmma: the ") + which + " operand reaches past the block's " +
                             std::to_string(lab::cuda::emu::device::dynamic_shared_bytes()) +
                             " bytes of dynamic shared memory");
  uint32_t bits = 0;
  memcpy(&bits, p, 2);
  return f16 ? mma::unpack<__half>(bits, 0) : mma::unpack<__nv_bfloat16>(bits, 0);
}

// K-major element (row, k); MN-major element (k, n): the layouts at the top.
inline size_t k_major_offset(const Operand& m, int row, int k) {
  return static_cast<size_t>(row % 8) * 16 + static_cast<size_t>(row / 8) * m.stride + (k % 8) * 2 +
         static_cast<size_t>(k / 8) * m.leading;
}
inline size_t mn_major_offset(const Operand& m, int k, int n) {
  return static_cast<size_t>(n % 8) * 2 + static_cast<size_t>(n / 8) * m.stride + (k % 8) * 16 +
         static_cast<size_t>(k / 8) * m.leading;
}

bool same_product(const Queued& x, const Queued& y);
void run_product(const Queued* const* lanes, int warp_in_group);

}  // namespace detail

// One thread's view of its warpgroup's queue of products. Declare one per thread, before the first product.
class Warpgroup {
 public:
  void fence() { fenced_ = true; }
  void commit() { ++committed_; }
  // Completes every committed group but the kPrior most recent, for the whole warp at once.
  template <int kPrior>
  void wait() {
    prior_ = kPrior;
    lab::cuda::emu::device::warp_task(lab::cuda::emu::device::WarpOp::Wgmma, detail::kAllLanes, this, &wait_task);
    fenced_ = false;
  }
  template <int N>
  void fence_operand(float (&)[N / 8][4]) {}
  template <int K>
  void fence_operand(uint32_t (&)[K][4]) {}

  template <typename E, int N, BMajor kB>
  void mma_shared_a(float (&d)[N / 8][4], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
    queue<E>(N, true, kB, desc_a, desc_b, nullptr, &d[0][0], accumulate);
  }
  template <typename E, int N, BMajor kB>
  void mma_registers_a(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t desc_b, bool accumulate) {
    queue<E>(N, false, kB, 0, desc_b, a, &d[0][0], accumulate);
  }

 private:
  template <typename E>
  void queue(int n, bool a_in_shared, BMajor b_major, uint64_t desc_a, uint64_t desc_b, const uint32_t* a, float* d,
             bool accumulate) {
    static_assert(std::is_same_v<E, __nv_bfloat16> || std::is_same_v<E, __half>, "wgmma takes bf16 or f16 here");
    queued_.push_back(
        {n, std::is_same_v<E, __half>, a_in_shared, b_major, desc_a, desc_b, a, d, accumulate, fenced_, committed_});
  }
  static void wait_task(void* const* lanes, unsigned int mask);

  std::vector<detail::Queued> queued_;
  uint64_t committed_ = 0;
  int prior_ = 0;
  bool fenced_ = false;
};

// The warp's lanes have all reached the wait: run, in the order issued, every product of the groups it covers.
inline void Warpgroup::wait_task(void* const* lanes, unsigned int /*mask*/) {
  Warpgroup* group[warpSize];
  for (int lane = 0; lane < warpSize; ++lane) group[lane] = static_cast<Warpgroup*>(lanes[lane]);
  const Warpgroup& first = *group[0];
  const uint64_t done_below = first.committed_ > static_cast<uint64_t>(first.prior_)
                                  ? first.committed_ - static_cast<uint64_t>(first.prior_)
                                  : 0;
  size_t due = 0;
  while (due < first.queued_.size() && first.queued_[due].group < done_below) ++due;
  for (int lane = 1; lane < warpSize; ++lane) {
    const Warpgroup& other = *group[lane];
    bool same = other.committed_ == first.committed_ && other.prior_ == first.prior_ && other.queued_.size() >= due &&
                (due == other.queued_.size() || other.queued_[due].group >= done_below);
    for (size_t i = 0; same && i < due; ++i) same = detail::same_product(other.queued_[i], first.queued_[i]);
    if (!same)
      throw std::runtime_error(
          "wgmma: the lanes of a warp reached wgmma.wait_group with different products or "
          "groups queued (.sync.aligned: every lane issues the same ones)");
  }
  const int warp_in_group = static_cast<int>(threadIdx.x / warpSize) % 4;
  for (size_t i = 0; i < due; ++i) {
    const detail::Queued* product[warpSize];
    for (int lane = 0; lane < warpSize; ++lane) product[lane] = &group[lane]->queued_[i];
    if (!product[0]->fenced)
      throw std::runtime_error(
          "wgmma.mma_async issued with no wgmma.fence since the thread's last wgmma.wait_group "
          "(registers it reads or writes may have been written since)");
    detail::run_product(product, warp_in_group);
  }
  for (int lane = 0; lane < warpSize; ++lane)
    group[lane]->queued_.erase(group[lane]->queued_.begin(), group[lane]->queued_.begin() + static_cast<long>(due));
}

namespace detail {

inline bool same_product(const Queued& x, const Queued& y) {
  return x.n == y.n && x.f16 == y.f16 && x.a_in_shared == y.a_in_shared && x.b_major == y.b_major &&
         x.desc_b == y.desc_b && (!x.a_in_shared || x.desc_a == y.desc_a) && x.accumulate == y.accumulate &&
         x.group == y.group;
}

// D[16 rows of warp w, N] of one product: A, B and C gathered from the lanes and shared memory by the layouts at
// the top of the file, each output summed in k order, D scattered back into the lanes' accumulators.
inline void run_product(const Queued* const* lanes, int warp_in_group) {
  const Queued& q = *lanes[0];
  float a[16][16];
  if (q.a_in_shared) {
    const Operand m = decode(q.desc_a, "A");
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 16; ++k) a[r][k] = element(m, k_major_offset(m, 16 * warp_in_group + r, k), q.f16, "A");
  } else {
    for (int lane = 0; lane < warpSize; ++lane) {
      const uint32_t* reg = lanes[lane]->a;
      const int g = lane / 4, t = lane % 4;
      for (int h = 0; h < 2; ++h) {
        const auto half = [&](uint32_t bits) {
          return q.f16 ? mma::unpack<__half>(bits, h) : mma::unpack<__nv_bfloat16>(bits, h);
        };
        a[g][2 * t + h] = half(reg[0]);
        a[g + 8][2 * t + h] = half(reg[1]);
        a[g][2 * t + 8 + h] = half(reg[2]);
        a[g + 8][2 * t + 8 + h] = half(reg[3]);
      }
    }
  }
  const Operand b = decode(q.desc_b, "B");
  std::vector<float> bk(static_cast<size_t>(16) * q.n), c(static_cast<size_t>(16) * q.n, 0.0f);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < q.n; ++n)
      bk[static_cast<size_t>(k) * q.n + n] =
          element(b, q.b_major == BMajor::K ? k_major_offset(b, n, k) : mn_major_offset(b, k, n), q.f16, "B");
  // Register i of n8 block j of lane 4 g + t: row g + 8 (i / 2), column 8 j + 2 t + i % 2.
  const auto at = [&](int lane, int j, int i) -> float& {
    return c[static_cast<size_t>(lane / 4 + 8 * (i / 2)) * q.n + 8 * j + 2 * (lane % 4) + i % 2];
  };
  if (q.accumulate)
    for (int lane = 0; lane < warpSize; ++lane)
      for (int j = 0; j < q.n / 8; ++j)
        for (int i = 0; i < 4; ++i) at(lane, j, i) = lanes[lane]->d[4 * j + i];
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < q.n; ++n) {
      float acc = c[static_cast<size_t>(r) * q.n + n];
      for (int k = 0; k < 16; ++k) acc = fmaf(a[r][k], bk[static_cast<size_t>(k) * q.n + n], acc);
      c[static_cast<size_t>(r) * q.n + n] = acc;
    }
  for (int lane = 0; lane < warpSize; ++lane)
    for (int j = 0; j < q.n / 8; ++j)
      for (int i = 0; i < 4; ++i) lanes[lane]->d[4 * j + i] = at(lane, j, i);
}

}  // namespace detail

// Shared memory written by the threads, made visible to the tensor cores' reads (fence.proxy.async on a GPU).
inline void fence_shared_writes() {}

#else

// ---------------------------------------------------------------- nvcc: the PTX instructions (sm_90a)

// The kernels that use these compile them only for sm_90a (the wgmma instructions exist nowhere else); elsewhere the
// functions trap, and the host code does not launch those kernels.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LAB_WGMMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define LAB_WGMMA_ASM(...) __trap()
#endif

#define LAB_WGMMA_OP(N, TYPE) "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE
#define LAB_WGMMA_D4(d, i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define LAB_WGMMA_D32(d, i)                                                                                           \
  LAB_WGMMA_D4(d, i), LAB_WGMMA_D4(d, i + 1), LAB_WGMMA_D4(d, i + 2), LAB_WGMMA_D4(d, i + 3), LAB_WGMMA_D4(d, i + 4), \
      LAB_WGMMA_D4(d, i + 5), LAB_WGMMA_D4(d, i + 6), LAB_WGMMA_D4(d, i + 7)

#define LAB_WGMMA_SS64(TYPE) \
  LAB_WGMMA_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" LAB_WGMMA_OP(64, TYPE)                               \
                " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "  \
                "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, %35;\n}\n"            \
                : LAB_WGMMA_D32(d, 0)                                                                             \
                : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(static_cast<int>(kB)))
#define LAB_WGMMA_SS128(TYPE) \
  LAB_WGMMA_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" LAB_WGMMA_OP(128, TYPE)                              \
                " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "  \
                "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "    \
                "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "    \
                "%59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"                                           \
                : LAB_WGMMA_D32(d, 0), LAB_WGMMA_D32(d, 8)                                                        \
                : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(static_cast<int>(kB)))
#define LAB_WGMMA_RS64(TYPE) \
  LAB_WGMMA_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" LAB_WGMMA_OP(64, TYPE)                               \
                " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "  \
                "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, "      \
                "%38;\n}\n"                                                                                       \
                : LAB_WGMMA_D32(d, 0)                                                                             \
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate)),     \
                  "n"(static_cast<int>(kB)))
#define LAB_WGMMA_RS128(TYPE) \
  LAB_WGMMA_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" LAB_WGMMA_OP(128, TYPE)                              \
                " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "  \
                "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "    \
                "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "    \
                "%59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"                             \
                : LAB_WGMMA_D32(d, 0), LAB_WGMMA_D32(d, 8)                                                        \
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate)),     \
                  "n"(static_cast<int>(kB)))

class Warpgroup {
 public:
  __device__ void fence() { LAB_WGMMA_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
  __device__ void commit() { LAB_WGMMA_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
  template <int kPrior>
  __device__ void wait() {
    LAB_WGMMA_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPrior) : "memory");
  }
  // An empty statement that "writes" every register of d: reads of d stay below the wait before it.
  template <int N>
  __device__ void fence_operand(float (&d)[N / 8][4]) {
#pragma unroll
    for (int i = 0; i < N / 8; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) asm volatile("" : "+f"(d[i][j])::"memory");
  }
  // The same for A fragments in registers, before the fence that precedes their products: the instructions that
  // write them stay above it (below it, ptxas serializes the products behind them).
  template <int K>
  __device__ void fence_operand(uint32_t (&a)[K][4]) {
#pragma unroll
    for (int i = 0; i < K; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
  }

  template <typename E, int N, BMajor kB>
  __device__ void mma_shared_a(float (&d)[N / 8][4], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
    static_assert(N == 64 || N == 128, "m64n64k16 and m64n128k16 are the shapes wrapped here");
    if constexpr (std::is_same_v<E, __nv_bfloat16>) {
      if constexpr (N == 64)
        LAB_WGMMA_SS64("bf16");
      else
        LAB_WGMMA_SS128("bf16");
    } else {
      static_assert(std::is_same_v<E, __half>, "wgmma takes bf16 or f16 here");
      if constexpr (N == 64)
        LAB_WGMMA_SS64("f16");
      else
        LAB_WGMMA_SS128("f16");
    }
  }
  template <typename E, int N, BMajor kB>
  __device__ void mma_registers_a(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t desc_b, bool accumulate) {
    static_assert(N == 64 || N == 128, "m64n64k16 and m64n128k16 are the shapes wrapped here");
    if constexpr (std::is_same_v<E, __nv_bfloat16>) {
      if constexpr (N == 64)
        LAB_WGMMA_RS64("bf16");
      else
        LAB_WGMMA_RS128("bf16");
    } else {
      static_assert(std::is_same_v<E, __half>, "wgmma takes bf16 or f16 here");
      if constexpr (N == 64)
        LAB_WGMMA_RS64("f16");
      else
        LAB_WGMMA_RS128("f16");
    }
  }
};

__device__ inline void fence_shared_writes() {
  LAB_WGMMA_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#undef LAB_WGMMA_RS128
#undef LAB_WGMMA_RS64
#undef LAB_WGMMA_SS128
#undef LAB_WGMMA_SS64
#undef LAB_WGMMA_D32
#undef LAB_WGMMA_D4
#undef LAB_WGMMA_OP
#undef LAB_WGMMA_ASM

#endif

}  // namespace lab::ops::cuda::wgmma
