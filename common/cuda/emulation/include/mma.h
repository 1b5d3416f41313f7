// Stand-in for the CUDA toolkit's mma.h (LAB_CUDA_EMULATION): the warp matrix functions (WMMA) of
// nvcuda::wmma for 16-bit inputs (__nv_bfloat16, __half) with float accumulators, in the shapes the hardware
// has for them (m16n16k16, m32n8k16, m8n32k16).
//
// A fragment is a tile of a matrix spread over the 32 lanes of a warp: each lane holds num_elements of its
// elements in x[]. Which lane holds which element is unspecified in CUDA and differs from the hardware's here
// (element j of lane l is the tile's element j * 32 + l in row-major order); code that only loads, stores,
// multiplies and applies elementwise operations to x[] cannot tell.
//
// load_matrix_sync, store_matrix_sync and mma_sync are warp-wide: every lane of the warp must call them
// (convergent, with the same arguments). Here each is a warp task of the block executor (device_functions.h):
// the lanes meet as in a __syncwarp, and the last to arrive does the work for all of them, moving elements
// between memory and every lane's fragment. So the executor's checks of warp collectives apply: a lane
// that exited, a partial warp, lanes that call different functions are faults naming the kernel, block and
// thread. On top, as the CUDA programming guide requires, a call whose lanes pass different pointers, leading
// dimensions or layouts, a pointer that is not 256-bit aligned, or a leading dimension that is not a
// multiple of 16 bytes is a fault.
//
// mma_sync computes D = A B + C element by element in float, in k order, with an FMA per product: products of
// 16-bit inputs are exact in float, as on tensor cores; the hardware's order of accumulation is unspecified.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "device_functions.h"

namespace nvcuda::wmma {

// ---------------------------------------------------------------- fragment types
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {

// The logical shape of a fragment: A is m x k, B is k x n, the accumulator m x n.
template <typename Use, int m, int n, int k>
struct Shape;
template <int m, int n, int k>
struct Shape<matrix_a, m, n, k> {
  static constexpr int rows = m, cols = k;
};
template <int m, int n, int k>
struct Shape<matrix_b, m, n, k> {
  static constexpr int rows = k, cols = n;
};
template <int m, int n, int k>
struct Shape<accumulator, m, n, k> {
  static constexpr int rows = m, cols = n;
};

constexpr bool is_supported_shape(int m, int n, int k) {
  return k == 16 && ((m == 16 && n == 16) || (m == 32 && n == 8) || (m == 8 && n == 32));
}

template <typename T>
constexpr bool is_input_type = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

}  // namespace detail

template <typename Use, int m, int n, int k, typename T, typename Layout = void>
class fragment {
  static_assert(detail::is_supported_shape(m, n, k), "WMMA shapes for 16-bit inputs: m16n16k16, m32n8k16, m8n32k16");
  static_assert(std::is_same_v<Use, accumulator> ? std::is_same_v<T, float> && std::is_void_v<Layout>
                                                 : detail::is_input_type<T> && !std::is_void_v<Layout>,
                "stand-in fragments: matrix_a/matrix_b of __nv_bfloat16 or __half with a layout, float accumulators");

 public:
  static constexpr int rows = detail::Shape<Use, m, n, k>::rows;
  static constexpr int cols = detail::Shape<Use, m, n, k>::cols;
  static constexpr int num_elements = rows * cols / warpSize;
  T x[num_elements];
};

template <typename Use, int m, int n, int k, typename T, typename Layout>
inline void fill_fragment(fragment<Use, m, n, k, T, Layout>& f, const T& value) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = value;
}

namespace detail {

// The memory offset of element (row, col) of a matrix stored with leading dimension ldm.
inline int64_t offset(int row, int col, unsigned ldm, bool row_major_layout) {
  return row_major_layout ? static_cast<int64_t>(row) * ldm + col : static_cast<int64_t>(col) * ldm + row;
}

template <typename... Parts>
[[noreturn]] void fail(const char* function, const Parts&... parts) {
  std::ostringstream message;
  message << "nvcuda::wmma::" << function << ": ";
  (message << ... << parts);
  throw std::invalid_argument(message.str());
}

// What one lane brings to a load or a store: its fragment, and the memory operand (which must be the same
// for every lane of the warp).
template <typename Fragment, typename Element>
struct MemoryCall {
  Fragment* fragment;
  Element* pointer;
  unsigned ldm;
  bool row_major_layout;
};

// The checks every lane's memory operand must pass: the same as lane `first`'s, aligned as the hardware
// needs it.
template <typename Call>
const Call& uniform_memory_operand(const char* function, void* const* lanes, unsigned mask) {
  const int first = __builtin_ctz(mask);
  const Call& call = *static_cast<const Call*>(lanes[first]);
  for (int lane = first + 1; lane < warpSize; ++lane) {
    if (lanes[lane] == nullptr) continue;
    const Call& other = *static_cast<const Call*>(lanes[lane]);
    if (other.pointer != call.pointer || other.ldm != call.ldm || other.row_major_layout != call.row_major_layout)
      fail(function, "lane ", lane, " passes pointer ", static_cast<const void*>(other.pointer), ", ldm ", other.ldm,
           ", ", other.row_major_layout ? "row" : "col", "-major, lane ", first, " pointer ",
           static_cast<const void*>(call.pointer), ", ldm ", call.ldm, ", ", call.row_major_layout ? "row" : "col",
           "-major: every lane of the warp must pass the same");
  }
  if (reinterpret_cast<uintptr_t>(call.pointer) % 32 != 0)
    fail(function, "pointer ", static_cast<const void*>(call.pointer), " is not 256-bit (32-byte) aligned");
  if (call.ldm * sizeof(*call.pointer) % 16 != 0)
    fail(function, "ldm ", call.ldm, " is not a multiple of 16 bytes (", 16 / sizeof(*call.pointer),
         " elements of this type)");
  return call;
}

// Every lane's fragment elements from memory (the last lane to arrive does it for all).
template <typename Fragment, typename Element>
void load_task(void* const* lanes, unsigned mask) {
  using Call = MemoryCall<Fragment, const Element>;
  const Call& call = uniform_memory_operand<Call>("load_matrix_sync", lanes, mask);
  for (int lane = 0; lane < warpSize; ++lane) {
    Fragment& f = *static_cast<const Call*>(lanes[lane])->fragment;
    for (int j = 0; j < Fragment::num_elements; ++j) {
      const int e = j * warpSize + lane;
      f.x[j] = call.pointer[offset(e / Fragment::cols, e % Fragment::cols, call.ldm, call.row_major_layout)];
    }
  }
}

template <typename Fragment, typename Element>
void store_task(void* const* lanes, unsigned mask) {
  using Call = MemoryCall<const Fragment, Element>;
  const Call& call = uniform_memory_operand<Call>("store_matrix_sync", lanes, mask);
  for (int lane = 0; lane < warpSize; ++lane) {
    const Fragment& f = *static_cast<const Call*>(lanes[lane])->fragment;
    for (int j = 0; j < Fragment::num_elements; ++j) {
      const int e = j * warpSize + lane;
      call.pointer[offset(e / Fragment::cols, e % Fragment::cols, call.ldm, call.row_major_layout)] = f.x[j];
    }
  }
}

template <typename D, typename A, typename B, typename C>
struct MmaCall {
  D* d;
  const A* a;
  const B* b;
  const C* c;
};

// Gathers the whole of a fragment's tile from the lanes' parts (member selects a, b or c of each lane's call).
template <typename Fragment, typename Call, typename Member>
void gather(void* const* lanes, Member member, float (&tile)[Fragment::rows][Fragment::cols]) {
  for (int lane = 0; lane < warpSize; ++lane) {
    const Fragment& f = *(static_cast<const Call*>(lanes[lane])->*member);
    for (int j = 0; j < Fragment::num_elements; ++j) {
      const int e = j * warpSize + lane;
      tile[e / Fragment::cols][e % Fragment::cols] = static_cast<float>(f.x[j]);
    }
  }
}

template <typename D, typename A, typename B, typename C>
void mma_task(void* const* lanes, unsigned /*mask: always the full warp*/) {
  using Call = MmaCall<D, A, B, C>;
  constexpr int m = A::rows, k = A::cols, n = B::cols;
  float a[m][k], b[k][n], c[m][n];
  gather<A, Call>(lanes, &Call::a, a);
  gather<B, Call>(lanes, &Call::b, b);
  gather<C, Call>(lanes, &Call::c, c);  // every C is read before any D is written: D may be C
  for (int lane = 0; lane < warpSize; ++lane) {
    D& d = *static_cast<const Call*>(lanes[lane])->d;
    for (int j = 0; j < D::num_elements; ++j) {
      const int e = j * warpSize + lane, row = e / n, col = e % n;
      float sum = c[row][col];
      for (int i = 0; i < k; ++i) sum = std::fma(a[row][i], b[i][col], sum);
      d.x[j] = sum;
    }
  }
}

constexpr unsigned kFullWarp = 0xffffffffu;

}  // namespace detail

// ---------------------------------------------------------------- the warp-wide functions

// matrix_a / matrix_b: the layout is the fragment's.
template <typename Use, int m, int n, int k, typename T, typename Layout>
void load_matrix_sync(fragment<Use, m, n, k, T, Layout>& f, const T* pointer, unsigned ldm) {
  using Fragment = fragment<Use, m, n, k, T, Layout>;
  detail::MemoryCall<Fragment, const T> call{&f, pointer, ldm, std::is_same_v<Layout, row_major>};
  lab::cuda::emu::device::warp_task(lab::cuda::emu::device::WarpOp::WmmaLoad, detail::kFullWarp, &call,
                                    &detail::load_task<Fragment, T>);
}

// The accumulator: the layout is the call's.
template <int m, int n, int k>
void load_matrix_sync(fragment<accumulator, m, n, k, float>& f, const float* pointer, unsigned ldm, layout_t layout) {
  using Fragment = fragment<accumulator, m, n, k, float>;
  detail::MemoryCall<Fragment, const float> call{&f, pointer, ldm, layout == mem_row_major};
  lab::cuda::emu::device::warp_task(lab::cuda::emu::device::WarpOp::WmmaLoad, detail::kFullWarp, &call,
                                    &detail::load_task<Fragment, float>);
}

template <int m, int n, int k>
void store_matrix_sync(float* pointer, const fragment<accumulator, m, n, k, float>& f, unsigned ldm, layout_t layout) {
  using Fragment = fragment<accumulator, m, n, k, float>;
  detail::MemoryCall<const Fragment, float> call{&f, pointer, ldm, layout == mem_row_major};
  lab::cuda::emu::device::warp_task(lab::cuda::emu::device::WarpOp::WmmaStore, detail::kFullWarp, &call,
                                    &detail::store_task<Fragment, float>);
}

// D = A B + C (D may be C).
template <int m, int n, int k, typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, m, n, k, float>& d, const fragment<matrix_a, m, n, k, T, LayoutA>& a,
              const fragment<matrix_b, m, n, k, T, LayoutB>& b, const fragment<accumulator, m, n, k, float>& c) {
  using D = fragment<accumulator, m, n, k, float>;
  using A = fragment<matrix_a, m, n, k, T, LayoutA>;
  using B = fragment<matrix_b, m, n, k, T, LayoutB>;
  detail::MmaCall<D, A, B, D> call{&d, &a, &b, &c};
  lab::cuda::emu::device::warp_task(lab::cuda::emu::device::WarpOp::WmmaMma, detail::kFullWarp, &call,
                                    &detail::mma_task<D, A, B, D>);
}

}  // namespace nvcuda::wmma
