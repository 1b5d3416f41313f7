// CPU flash attention (common/ops/flash_attention.h): the tiled algorithm, written to be read beside the CUDA
// kernels (cuda/flash_attention.cu), which follow the same steps with the same tiles.
//
// The unit of parallel work is one tile (of queries in the forward and the dQ pass, of keys in the dK/dV pass)
// of one (batch, head): a causal problem's tiles are uneven (the last query tile sees every key, the first only
// its own tile), so they are handed out dynamically. Each thread copies the tiles it works on into scratch of
// its own, widened to f32 (so the 16-bit dtypes share the code) and contiguous (so the products are small sgemms,
// issued single-threaded inside the parallel region). The scratch is one workspace tensor from the CPU
// allocator: per thread a few tiles of Br or Bc rows, independent of T, which is the point of the algorithm.
// The one-pass backward (FlashBackward::OnePass) is the exception: one task per (batch, head), whose thread also
// keeps the head's f32 dQ, T x HS floats (256 KiB at T = 1024, HS = 64), and computes S and dP once per tile pair.
#include "common/ops/flash_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/core/dtype.h"
#include "common/core/memory.h"
#include "common/core/parallel.h"
#include "common/ops/cpu/gemm.h"
#include "common/ops/cpu/vec_math.h"

namespace lab::ops::cpu {

namespace {

// ---------------------------------------------------------------- storage types
// How a tensor's elements are stored, and their conversions to and from f32 (round to nearest-even).
struct F32Storage {
  using type = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};
struct Bf16Storage {
  using type = uint16_t;
  static float load(uint16_t v) { return bf16_bits_to_float(v); }
  static uint16_t store(float v) { return float_to_bf16_bits(v); }
};
struct F16Storage {
  using type = uint16_t;
  static float load(uint16_t v) { return f16_bits_to_float(v); }
  static uint16_t store(float v) { return float_to_f16_bits(v); }
};

template <typename Body>
void with_storage(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::BF16: return body(Bf16Storage{});
    case DType::F16: return body(F16Storage{});
    default: return body(F32Storage{});
  }
}

constexpr int64_t kBr = kFlashQueryTile, kBc = kFlashKeyTile;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

struct Dims {
  int64_t B, T, C, NH, HS;
  float scale;
  int64_t query_tiles, key_tiles;
  // Where head bh = b NH + h starts: in qkv and dqkv [B, T, 3C] (its q part; k and v C and 2C further), and in the
  // [B, T, C] tensors (out, dout).
  int64_t qkv_head(int64_t bh) const { return bh / NH * T * 3 * C + bh % NH * HS; }
  int64_t row_head(int64_t bh) const { return bh / NH * T * C + bh % NH * HS; }
};

Dims dims_of(const Tensor& qkv, int n_head) {
  const int64_t C = qkv.dim(2) / 3, T = qkv.dim(1);
  return {qkv.dim(0),
          T,
          C,
          n_head,
          C / n_head,
          1.0f / std::sqrt(static_cast<float>(C / n_head)),
          (T + kBr - 1) / kBr,
          (T + kBc - 1) / kBc};
}

// A block of `rows` rows of one head, [rows, HS] with row stride `ld`, starting at `first` (already offset to
// the batch row, head and q/k/v part), widened into the contiguous [rows, HS] tile `tile`.
template <typename S>
void load_tile(float* tile, const typename S::type* first, int64_t rows, int64_t HS, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < HS; ++d) tile[r * HS + d] = S::load(first[r * ld + d]);
}

// dst[r, d] += tile[r, d] (GradWrite::Add) or = tile[r, d] (Overwrite, dst not read), rounded to the storage type.
template <typename S>
void write_tile(typename S::type* first, const float* tile, int64_t rows, int64_t HS, int64_t ld, GradWrite write) {
  const bool add = write == GradWrite::Add;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < HS; ++d) {
      typename S::type& dst = first[r * ld + d];
      dst = S::store(add ? S::load(dst) + tile[r * HS + d] : tile[r * HS + d]);
    }
}

// Per-thread scratch: `floats` floats for each thread of the parallel region, from the CPU allocator.
class Scratch {
 public:
  explicit Scratch(int64_t floats) : floats_(floats) {
    const MemoryScope scope(MemCategory::Workspace);
    buffer_ = Tensor::empty({num_threads(), floats}, DType::F32);
  }
  float* of_thread(int thread) const { return buffer_.data<float>() + thread * floats_; }

 private:
  int64_t floats_;
  Tensor buffer_;
};

// The causal mask inside a tile: query t sees key s when s <= t. The keys of the tile start at s0; returns how
// many of the tile's `cols` keys query t sees (0 when t < s0).
int64_t visible_keys(int64_t t, int64_t s0, int64_t cols) {
  return std::clamp<int64_t>(t - s0 + 1, 0, cols);
}

// ---------------------------------------------------------------- forward

template <typename S>
void forward(const Dims& d, const typename S::type* qkv, typename S::type* out, float* lse) {
  const int64_t ld = 3 * d.C;
  // Q, K, V, O tiles, the scores / probabilities, the running max and sum.
  const Scratch scratch(kBr * d.HS * 2 + kBc * d.HS * 2 + kBr * kBc + 2 * kBr);
#pragma omp parallel
  {
    float* q = scratch.of_thread(omp_get_thread_num());
    float* o = q + kBr * d.HS;
    float* k = o + kBr * d.HS;
    float* v = k + kBc * d.HS;
    float* p = v + kBc * d.HS;
    float* m = p + kBr * kBc;
    float* l = m + kBr;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < d.B * d.NH * d.query_tiles; ++task) {
      const int64_t bh = task / d.query_tiles;
      const int64_t t0 = task % d.query_tiles * kBr, rows = std::min(kBr, d.T - t0);
      const typename S::type* head = qkv + d.qkv_head(bh);
      load_tile<S>(q, head + t0 * ld, rows, d.HS, ld);
      std::fill(o, o + rows * d.HS, 0.0f);
      std::fill(m, m + rows, kMinusInf);
      std::fill(l, l + rows, 0.0f);
      // Key tiles at or below the diagonal: the last one holds the tile's last query. Tiles above it are
      // entirely masked and skipped, which halves the work of a causal problem.
      const int64_t last_key_tile = (t0 + rows - 1) / kBc;
      for (int64_t kt = 0; kt <= last_key_tile; ++kt) {
        const int64_t s0 = kt * kBc, cols = std::min(kBc, d.T - s0);
        load_tile<S>(k, head + d.C + s0 * ld, cols, d.HS, ld);
        load_tile<S>(v, head + 2 * d.C + s0 * ld, cols, d.HS, ld);
        sgemm(false, true, rows, cols, d.HS, d.scale, q, d.HS, k, d.HS, 0.0f, p, cols);  // S = scale Q K^T
        for (int64_t r = 0; r < rows; ++r) {
          float* row = p + r * cols;
          const int64_t seen = visible_keys(t0 + r, s0, cols);
          float tile_max = kMinusInf;
          for (int64_t s = 0; s < seen; ++s) tile_max = std::max(tile_max, row[s]);
          const float new_max = std::max(m[r], tile_max);
          if (new_max == kMinusInf) {  // nothing seen yet: this row's P is all zeros
            std::fill(row, row + cols, 0.0f);
            continue;
          }
          // The running sum and output were scaled for the old max: rescale them to the new one.
          const float rescale = m[r] == kMinusInf ? 0.0f : exp_fast(m[r] - new_max);
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int64_t s = 0; s < seen; ++s) {
            row[s] = exp_fast(row[s] - new_max);
            sum += row[s];
          }
          std::fill(row + seen, row + cols, 0.0f);
          l[r] = l[r] * rescale + sum;
          m[r] = new_max;
          for (int64_t j = 0; j < d.HS; ++j) o[r * d.HS + j] *= rescale;
        }
        sgemm(false, false, rows, d.HS, cols, 1.0f, p, cols, v, d.HS, 1.0f, o, d.HS);  // O += P V
      }
      typename S::type* out_tile = out + d.row_head(bh) + t0 * d.C;
      for (int64_t r = 0; r < rows; ++r) {
        const float inv = 1.0f / l[r];
        for (int64_t j = 0; j < d.HS; ++j) out_tile[r * d.C + j] = S::store(o[r * d.HS + j] * inv);
        lse[bh * d.T + t0 + r] = m[r] + std::log(l[r]);
      }
    }
  }
}

// ---------------------------------------------------------------- backward

// D[b,h,t] = sum_j dout[b,t,h,j] out[b,t,h,j]: the term of the softmax's backward that needs the whole row,
// computed once from the outputs instead of from a row of P.
template <typename S>
void row_dot(const Dims& d, const typename S::type* dout, const typename S::type* out, float* D) {
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < d.B * d.NH; ++bh) {
    for (int64_t t = 0; t < d.T; ++t) {
      const int64_t offset = d.row_head(bh) + t * d.C;
      float sum = 0.0f;
      for (int64_t j = 0; j < d.HS; ++j) sum += S::load(dout[offset + j]) * S::load(out[offset + j]);
      D[bh * d.T + t] = sum;
    }
  }
}

// The tiles one query tile and one key tile share in the backward: the probabilities P recomputed from the
// saved log-sum-exp, and dS = P (dP - D) from dP = dO V^T. On return p holds P and ds holds dS, [rows, cols].
void probabilities_and_score_grads(const Dims& d, const float* q, const float* k, const float* v, const float* dO,
                                   const float* lse, const float* D, int64_t t0, int64_t rows, int64_t s0, int64_t cols,
                                   float* p, float* ds) {
  sgemm(false, true, rows, cols, d.HS, d.scale, q, d.HS, k, d.HS, 0.0f, p, cols);  // scale Q K^T
  sgemm(false, true, rows, cols, d.HS, 1.0f, dO, d.HS, v, d.HS, 0.0f, ds, cols);   // dP = dO V^T
  for (int64_t r = 0; r < rows; ++r) {
    float* prow = p + r * cols;
    float* dsrow = ds + r * cols;
    const int64_t seen = visible_keys(t0 + r, s0, cols);
    const float row_lse = lse[r], row_d = D[r];
#pragma omp simd
    for (int64_t s = 0; s < seen; ++s) {
      prow[s] = exp_fast(prow[s] - row_lse);
      dsrow[s] = prow[s] * (dsrow[s] - row_d);
    }
    std::fill(prow + seen, prow + cols, 0.0f);
    std::fill(dsrow + seen, dsrow + cols, 0.0f);
  }
}

// A thread's tiles in the dK/dV pass and the one pass: K, V, dK and dV of a key tile, Q and dO of a query tile, P
// and dS of the pair; `extra` floats after them (the one pass's dQ of a head).
struct KeyTileScratch {
  static int64_t floats(const Dims& d) { return kBc * d.HS * 4 + kBr * d.HS * 2 + 2 * kBr * kBc; }
  explicit KeyTileScratch(const Dims& d, float* base)
      : k(base),
        v(k + kBc * d.HS),
        dk(v + kBc * d.HS),
        dv(dk + kBc * d.HS),
        q(dv + kBc * d.HS),
        dO(q + kBr * d.HS),
        p(dO + kBr * d.HS),
        ds(p + kBr * kBc),
        extra(ds + kBr * kBc) {}
  float *k, *v, *dk, *dv, *q, *dO, *p, *ds, *extra;
};

// Key tile s0 of head (b, h): its dK and dV summed over every query tile that sees it, and stored into dqkv. With
// dq_head (the head's [T, HS] f32 dQ, the one-pass backward), each pair's scale dS K is added into it too.
template <typename S>
void key_tile_pass(const Dims& d, const typename S::type* qkv, const typename S::type* dout, const float* lse,
                   const float* D, typename S::type* dqkv, GradWrite write, int64_t bh, int64_t s0,
                   const KeyTileScratch& t, float* dq_head) {
  const int64_t ld = 3 * d.C, cols = std::min(kBc, d.T - s0), head_offset = d.qkv_head(bh);
  const typename S::type* head = qkv + head_offset;
  const typename S::type* dout_head = dout + d.row_head(bh);
  lse += bh * d.T;
  D += bh * d.T;
  load_tile<S>(t.k, head + d.C + s0 * ld, cols, d.HS, ld);
  load_tile<S>(t.v, head + 2 * d.C + s0 * ld, cols, d.HS, ld);
  std::fill(t.dk, t.dk + cols * d.HS, 0.0f);
  std::fill(t.dv, t.dv + cols * d.HS, 0.0f);
  // Query tiles from the one holding key s0 (earlier queries see none of these keys) to the last.
  for (int64_t qt = s0 / kBr; qt < d.query_tiles; ++qt) {
    const int64_t t0 = qt * kBr, rows = std::min(kBr, d.T - t0);
    load_tile<S>(t.q, head + t0 * ld, rows, d.HS, ld);
    load_tile<S>(t.dO, dout_head + t0 * d.C, rows, d.HS, d.C);
    probabilities_and_score_grads(d, t.q, t.k, t.v, t.dO, lse + t0, D + t0, t0, rows, s0, cols, t.p, t.ds);
    sgemm(true, false, cols, d.HS, rows, 1.0f, t.p, cols, t.dO, d.HS, 1.0f, t.dv, d.HS);     // dV += P^T dO
    sgemm(true, false, cols, d.HS, rows, d.scale, t.ds, cols, t.q, d.HS, 1.0f, t.dk, d.HS);  // dK += scale dS^T Q
    if (dq_head != nullptr)                                                                  // dQ += scale dS K
      sgemm(false, false, rows, d.HS, cols, d.scale, t.ds, cols, t.k, d.HS, 1.0f, dq_head + t0 * d.HS, d.HS);
  }
  write_tile<S>(dqkv + head_offset + d.C + s0 * ld, t.dk, cols, d.HS, ld, write);
  write_tile<S>(dqkv + head_offset + 2 * d.C + s0 * ld, t.dv, cols, d.HS, ld, write);
}

// Pass 1, one task per key tile: dK and dV of the tile summed over every query tile that sees it.
template <typename S>
void key_tile_grads(const Dims& d, const typename S::type* qkv, const typename S::type* dout, const float* lse,
                    const float* D, typename S::type* dqkv, GradWrite write) {
  const Scratch scratch(KeyTileScratch::floats(d));
#pragma omp parallel
  {
    const KeyTileScratch tiles(d, scratch.of_thread(omp_get_thread_num()));
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < d.B * d.NH * d.key_tiles; ++task)
      key_tile_pass<S>(d, qkv, dout, lse, D, dqkv, write, task / d.key_tiles, task % d.key_tiles * kBc, tiles, nullptr);
  }
}

// The one-pass backward, one task per (batch, head): its key tiles in order, each pair's dQ added into the head's
// f32 dQ as it goes. For each query tile the key tiles arrive in the order the second pass walks them, with the
// same products: the same sums as key_tile_grads and query_tile_grads together, with no S and dP computed twice.
// The scratch per thread holds the head's dQ, T x HS floats, beside the tiles.
template <typename S>
void head_grads(const Dims& d, const typename S::type* qkv, const typename S::type* dout, const float* lse,
                const float* D, typename S::type* dqkv, GradWrite write) {
  const int64_t ld = 3 * d.C;
  const Scratch scratch(KeyTileScratch::floats(d) + d.T * d.HS);
#pragma omp parallel
  {
    const KeyTileScratch tiles(d, scratch.of_thread(omp_get_thread_num()));
    float* dq = tiles.extra;
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < d.B * d.NH; ++bh) {
      std::fill(dq, dq + d.T * d.HS, 0.0f);
      for (int64_t kt = 0; kt < d.key_tiles; ++kt)
        key_tile_pass<S>(d, qkv, dout, lse, D, dqkv, write, bh, kt * kBc, tiles, dq);
      write_tile<S>(dqkv + d.qkv_head(bh), dq, d.T, d.HS, ld, write);
    }
  }
}

// Pass 2, one task per query tile: dQ of the tile summed over the key tiles it sees.
template <typename S>
void query_tile_grads(const Dims& d, const typename S::type* qkv, const typename S::type* dout, const float* lse,
                      const float* D, typename S::type* dqkv, GradWrite write) {
  const int64_t ld = 3 * d.C;
  const Scratch scratch(kBr * d.HS * 3 + kBc * d.HS * 2 + 2 * kBr * kBc);
#pragma omp parallel
  {
    float* q = scratch.of_thread(omp_get_thread_num());
    float* dO = q + kBr * d.HS;
    float* dq = dO + kBr * d.HS;
    float* k = dq + kBr * d.HS;
    float* v = k + kBc * d.HS;
    float* p = v + kBc * d.HS;
    float* ds = p + kBr * kBc;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < d.B * d.NH * d.query_tiles; ++task) {
      const int64_t bh = task / d.query_tiles;
      const int64_t t0 = task % d.query_tiles * kBr, rows = std::min(kBr, d.T - t0);
      const int64_t head_offset = d.qkv_head(bh);
      const typename S::type* head = qkv + head_offset;
      load_tile<S>(q, head + t0 * ld, rows, d.HS, ld);
      load_tile<S>(dO, dout + d.row_head(bh) + t0 * d.C, rows, d.HS, d.C);
      std::fill(dq, dq + rows * d.HS, 0.0f);
      const int64_t last_key_tile = (t0 + rows - 1) / kBc;
      for (int64_t kt = 0; kt <= last_key_tile; ++kt) {
        const int64_t s0 = kt * kBc, cols = std::min(kBc, d.T - s0);
        load_tile<S>(k, head + d.C + s0 * ld, cols, d.HS, ld);
        load_tile<S>(v, head + 2 * d.C + s0 * ld, cols, d.HS, ld);
        probabilities_and_score_grads(d, q, k, v, dO, lse + bh * d.T + t0, D + bh * d.T + t0, t0, rows, s0, cols, p,
                                      ds);
        sgemm(false, false, rows, d.HS, cols, d.scale, ds, cols, k, d.HS, 1.0f, dq, d.HS);  // dQ += scale dS K
      }
      write_tile<S>(dqkv + head_offset + t0 * ld, dq, rows, d.HS, ld, write);
    }
  }
}

}  // namespace

// One set of loops: `tiles` chooses among CUDA kernels only.
void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head,
                             FlashTiles /*tiles*/) {
  const Dims d = dims_of(qkv, n_head);
  if (d.B == 0 || d.T == 0 || d.C == 0) return;
  with_storage(qkv.dtype(), [&](auto storage) {
    using S = decltype(storage);
    using E = typename S::type;
    forward<S>(d, static_cast<const E*>(qkv.raw()), static_cast<E*>(out.raw()), lse.data<float>());
  });
}

void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head, GradWrite dqkv_write, FlashBackward passes,
                              FlashTiles /*tiles*/) {
  const Dims d = dims_of(qkv, n_head);
  if (d.B == 0 || d.T == 0 || d.C == 0) return;
  const MemoryScope scope(MemCategory::Workspace);
  const Tensor D = Tensor::empty({d.B, d.NH, d.T}, DType::F32);
  with_storage(qkv.dtype(), [&](auto storage) {
    using S = decltype(storage);
    using E = typename S::type;
    const E* qkv_data = static_cast<const E*>(qkv.raw());
    const E* dout_data = static_cast<const E*>(dout.raw());
    E* dqkv_data = static_cast<E*>(dqkv.raw());
    row_dot<S>(d, dout_data, static_cast<const E*>(out.raw()), D.data<float>());
    // Every element of dK and dV belongs to one key tile, every element of dQ to one query tile (or one head): each
    // is stored once.
    if (passes == FlashBackward::OnePass) {
      head_grads<S>(d, qkv_data, dout_data, lse.data<float>(), D.data<float>(), dqkv_data, dqkv_write);
      return;
    }
    key_tile_grads<S>(d, qkv_data, dout_data, lse.data<float>(), D.data<float>(), dqkv_data, dqkv_write);
    query_tile_grads<S>(d, qkv_data, dout_data, lse.data<float>(), D.data<float>(), dqkv_data, dqkv_write);
  });
}

}  // namespace lab::ops::cpu
