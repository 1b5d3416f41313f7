// CPU version of ch06_single_gpu/fused_residual_layernorm.h: one pass over memory, forward and backward.
//
// The unfused reference (ops::cpu::residual_forward, then ops::cpu::layernorm_forward) writes the whole residual
// stream and then reads all of it back: at GPT-2's sizes (8192 rows of 768 floats, 25 MB a tensor) that read
// comes from DRAM. Here each row is added, written and normalised while it sits in L1 (3 KB at C = 768): the
// mean is summed in the same loop that writes residual, the variance and the output read the row from L1.
//
// Backward: the reference makes three passes over memory (the LayerNorm's dx into a temporary, dweight and
// dbias by column slices re-reading dout and x, then the residual's da and db from the temporary). Here one
// pass over the rows does all of it: each row's dx goes straight into da and db, and its dweight and dbias
// terms into the partial sums of its chunk of kRowsPerChunk rows. The chunks' sums are then added in chunk
// order, so the result does not depend on the number of threads.
//
// 16-bit activations run the core's unfused ops (residual_forward, layernorm_forward; layernorm_backward and the
// gradient's copy): the CPU keeps no 16-bit loops of its own for this op.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ch06_single_gpu/fused_residual_layernorm.h"
#include "common/ops/layernorm.h"
#include "common/ops/residual.h"

namespace lab::ch06::cpu {

namespace {
// Rows whose dweight/dbias terms share one partial sum: a fixed number, so the order of the additions is the
// same whatever the thread count; large enough that the partial sums (2 C floats per chunk) stay small.
constexpr int64_t kRowsPerChunk = 64;
}  // namespace

void fused_residual_layernorm_forward(const Tensor& residual, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias) {
  if (a.dtype() != DType::F32) {
    ops::cpu::residual_forward(residual, a, b);
    ops::cpu::layernorm_forward(out, mean, rstd, residual, weight, bias);
    return;
  }
  const int64_t C = a.dim(-1);
  if (C == 0 || a.numel() == 0) return;
  const int64_t N = a.numel() / C;
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  const float* wp = weight.data<float>();
  const float* biasp = bias.data<float>();
  float* rp = residual.data<float>();
  float* op = out.data<float>();
  float* mp = mean.data<float>();
  float* sp = rstd.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* arow = ap + n * C;
    const float* brow = bp + n * C;
    float* row = rp + n * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < C; ++c) {
      const float v = arow[c] + brow[c];
      row[c] = v;
      sum += v;
    }
    const float m = sum / static_cast<float>(C);
    float var = 0.0f;  // around the mean, from the row now in L1
#pragma omp simd reduction(+ : var)
    for (int64_t c = 0; c < C; ++c) var += (row[c] - m) * (row[c] - m);
    const float s = 1.0f / std::sqrt(var / static_cast<float>(C) + ops::kLayerNormEps);
    float* orow = op + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) orow[c] = (row[c] - m) * s * wp[c] + biasp[c];
    mp[n] = m;
    sp[n] = s;
  }
}

void fused_residual_layernorm_backward(const Tensor& da, const Tensor& db, const Tensor& dweight, const Tensor& dbias,
                                       const Tensor& dresidual, const Tensor& dout, const Tensor& residual,
                                       const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                       ops::GradWrite dparams_write) {
  const int64_t C = residual.dim(-1);
  if (C == 0 || residual.numel() == 0) return;
  const int64_t N = residual.numel() / C;
  const int64_t chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  const float* xp = residual.data<float>();
  const float* dp = dout.data<float>();
  const float* wp = weight.data<float>();
  const float* mp = mean.data<float>();
  const float* sp = rstd.data<float>();
  const float* drp = dresidual.defined() ? dresidual.data<float>() : nullptr;
  float* dap = da.defined() ? da.data<float>() : nullptr;
  float* dbp = db.defined() ? db.data<float>() : nullptr;
  // partials[k] holds chunk k's dweight sums (C floats) then its dbias sums (C floats).
  std::vector<float> partials(static_cast<size_t>(chunks * 2 * C), 0.0f);

#pragma omp parallel
  {
    std::vector<float> total(static_cast<size_t>(C));  // this row's gradient of residual
    float* g = total.data();
#pragma omp for schedule(static)
    for (int64_t k = 0; k < chunks; ++k) {
      float* dw_sum = partials.data() + k * 2 * C;
      float* db_sum = dw_sum + C;
      for (int64_t n = k * kRowsPerChunk; n < std::min(N, (k + 1) * kRowsPerChunk); ++n) {
        const float* x = xp + n * C;
        const float* d = dp + n * C;
        const float m = mp[n], s = sp[n];
        float g_mean = 0.0f, gx_mean = 0.0f;
#pragma omp simd reduction(+ : g_mean, gx_mean)
        for (int64_t c = 0; c < C; ++c) {
          const float gc = d[c] * wp[c];
          g_mean += gc;
          gx_mean += gc * (x[c] - m) * s;
        }
        g_mean /= static_cast<float>(C);
        gx_mean /= static_cast<float>(C);
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          const float xhat = (x[c] - m) * s;
          g[c] = s * (d[c] * wp[c] - g_mean - xhat * gx_mean);
          dw_sum[c] += d[c] * xhat;
          db_sum[c] += d[c];
        }
        // dresidual is read into g before da or db is written: either may be dresidual itself.
        if (drp) {
          const float* dr = drp + n * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) g[c] += dr[c];
        }
        if (dap) {
          float* row = dap + n * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) row[c] += g[c];
        }
        if (dbp) {
          float* row = dbp + n * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) row[c] += g[c];
        }
      }
    }
  }

  float* dwp = dweight.data<float>();
  float* dbiasp = dbias.data<float>();
  const bool add_params = dparams_write == ops::GradWrite::Add;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    float dw = 0.0f, dbias_c = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) {  // chunk order: the same sum whatever the thread count
      dw += partials[static_cast<size_t>(k * 2 * C + c)];
      dbias_c += partials[static_cast<size_t>(k * 2 * C + C + c)];
    }
    dwp[c] = add_params ? dwp[c] + dw : dw;
    dbiasp[c] = add_params ? dbiasp[c] + dbias_c : dbias_c;
  }
}

void fused_residual_layernorm_backward_through(const Tensor& dsum, ops::GradWrite dsum_write, const Tensor& dcopy,
                                               const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                               const Tensor& residual, const Tensor& weight, const Tensor& mean,
                                               const Tensor& rstd, ops::GradWrite dparams_write) {
  ops::cpu::layernorm_backward(dsum, dweight, dbias, dout, residual, weight, mean, rstd, dsum_write, dparams_write);
  if (dcopy.defined()) ops::cpu::residual_gradient_copy(dcopy, dsum);
}

}  // namespace lab::ch06::cpu
