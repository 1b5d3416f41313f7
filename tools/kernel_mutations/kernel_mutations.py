#!/usr/bin/env python3
"""Mutation check of the CUDA tests: break a kernel on purpose, one way at a time, and see which tests fail.

A test suite that passes whatever the kernels compute proves nothing. This script applies each mutation of
MUTATIONS below (a dropped max subtraction, a wrong loop bound, a missing barrier, a one-pass variance, an
overwrite instead of an accumulation, ...) to a private copy of the source tree, rebuilds the CUDA test
programs of the emulation build (LAB_CUDA_EMULATION: the kernels run on the CPU), runs them, and reports
which tests caught the mutation. The working tree itself is never modified.

    python3 tools/kernel_mutations/kernel_mutations.py                  # every mutation, table on stdout
    python3 tools/kernel_mutations/kernel_mutations.py --only softmax-no-max --seed 7
    python3 tools/kernel_mutations/kernel_mutations.py --out mutations.md
    python3 tools/kernel_mutations/kernel_mutations.py --only flash-one-pass-dq-unscaled \
        --program test_ch09_flash_attention_cuda              # one mutation against the one program that tests it

The copy and its build live in --work (default build-mutations/ beside the repository root). The first run
configures and builds everything (minutes); later runs refresh the copy and rebuild only what changed.
Before the mutations, the unmutated tests must all pass. --seed sets LAB_EMU_SEED, so the emulator shuffles
the order of blocks and threads (a missing barrier then meets a schedule it was not written for); a mutation whose
race the default order hides names the seed its tests run under otherwise (Mutation.seed).

Exit status: 0 when every mutation was caught by at least one test, 1 when one was not, 2 when the check
could not run (a mutation no longer applies, the build fails, or the unmutated tests fail).
"""

import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_PROGRAMS = ["test_cuda_ops", "test_cuda_ops_16bit", "test_gpt2_cuda", "test_ch09_flash_attention_cuda",
                 "test_ch06_classifier_cuda", "test_ch09_warpgroup_mma_cuda"]
TEST_TIMEOUT_S = 900


@dataclass
class Mutation:
    name: str
    path: str  # relative to the repository root
    edits: list  # (exact text, replacement): each text must occur exactly once in the file
    what: str
    seed: int = None  # the LAB_EMU_SEED its tests run under when --seed gives none: a race the default order hides


MUTATIONS = [
    Mutation("softmax-no-max", "common/ops/cuda/attention.cu",
             [("  mx = warp_max(mx);\n", "  mx = 0.0f;\n")],
             "causal softmax: no max subtraction (exp of the raw scores)"),
    Mutation("softmax-mask-off-by-one", "common/ops/cuda/attention.cu",
             [("a[s] = s <= t ? expf(a[s] - mx) * inv : 0.0f;", "a[s] = s < t ? expf(a[s] - mx) * inv : 0.0f;")],
             "causal softmax: the diagonal written as zero (s < t for s <= t)"),
    Mutation("softmax-backward-no-dot", "common/ops/cuda/attention.cu",
             [("scale * a[s] * (d[s] - dot)", "scale * a[s] * d[s]")],
             "softmax backward: the row's dot product left out"),
    Mutation("classifier-no-max", "common/ops/cuda/classifier.cu",
             [("  mx = block_max(mx, scratch);\n", "  mx = 0.0f;\n")],
             "fused classifier: no max subtraction"),
    Mutation("classifier-padding-unwritten", "common/ops/cuda/classifier.cu",
             [("for (int64_t v = threadIdx.x; v < Vp; v += blockDim.x)",
               "for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)")],
             "fused classifier: padded columns [vocab, Vp) not zeroed"),
    Mutation("classifier-shared-row-loads-again", "ch06_single_gpu/kernels/04_classifier/fused_classifier.cu",
             [("first < pieces; first += kLoadBatch * kSharedThreads) {", "first < pieces; first += kSharedThreads) {")],
             "fused classifier v6 (row in shared memory): each batch of loads starts one stride on, not four, so "
             "pieces count up to four times in the sum"),
    Mutation("layernorm-bound", "common/ops/cuda/layernorm.cu",
             [("for (int64_t c = lane; c < C; c += kWarpSize) sum += load(xr[c]);",
               "for (int64_t c = lane; c < C - 1; c += kWarpSize) sum += load(xr[c]);")],
             "layernorm forward: the mean's loop stops at C - 1"),
    Mutation("layernorm-one-pass-variance", "common/ops/cuda/layernorm.cu",
             [("    const float d = load(xr[c]) - m;\n    sq += d * d;\n  }\n"
               "  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + kLayerNormEps);",
               "    sq += load(xr[c]) * load(xr[c]);\n  }\n"
               "  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) - m * m + kLayerNormEps);")],
             "layernorm forward: variance as E[x^2] - E[x]^2"),
    Mutation("layernorm-dx-overwrite", "common/ops/cuda/layernorm.cu",
             [("dxr[c] = store_as<D>((add ? load(dxr[c]) : 0.0f) + s * (", "dxr[c] = store_as<D>((add ? 0.0f : 0.0f) + s * (")],
             "layernorm backward (one element a load): GradWrite::Add writes dx over instead of adding into it"),
    Mutation("layernorm-dx-pieces-overwrite", "common/ops/cuda/layernorm.cu",
             [("out.e[e] = store_as<D>((add ? load(out.e[e]) : 0.0f) + s * (",
               "out.e[e] = store_as<D>((add ? 0.0f : 0.0f) + s * (")],
             "layernorm backward (16-byte pieces): GradWrite::Add writes dx over instead of adding into it"),
    Mutation("layernorm-dw-warps-overwrite", "common/ops/cuda/layernorm.cu",
             [("dw_total += warp_sums[v][0][slot];", "dw_total = warp_sums[v][0][slot];")],
             "layernorm backward (16-byte pieces): the block's dw is its last warp's, not the sum of its warps'"),
    Mutation("layernorm-pieces-missing-barrier", "common/ops/cuda/layernorm.cu",
             [("  __syncthreads();\n  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {",
               "  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {")],
             "layernorm backward (16-byte pieces): no barrier before the block adds its warps' dw and db"),
    Mutation("layernorm-residual-add-dropped", "common/ops/cuda/layernorm.cu",
             [("xv[p].e[e] = store_as<D>(load(xv[p].e[e]) + load(bv.e[e]));",
               "xv[p].e[e] = store_as<D>(load(xv[p].e[e]) + 0.0f * load(bv.e[e]));")],
             "layernorm forward with the residual add (16-byte pieces): the second input is not added"),
    Mutation("layernorm-dx-copy-is-dout", "common/ops/cuda/layernorm.cu",
             [("if (dx_copy != nullptr) reinterpret_cast<Piece<D>*>(dx_copy + row * C)[piece] = out;",
               "if (dx_copy != nullptr) reinterpret_cast<Piece<D>*>(dx_copy + row * C)[piece] = dv[p];")],
             "layernorm backward (16-byte pieces): the residual's second gradient gets dout, not dx"),
    Mutation("column-totals-skip-chunks", "common/ops/cuda/column_sums.cuh",
             [("for (int64_t j = threadIdx.y; j < chunks; j += kColumnRows) {",
               "for (int64_t j = threadIdx.y; j < chunks; j += 2 * kColumnRows) {")],
             "column totals: each thread row adds every other of its chunks' partial sums"),
    Mutation("block-reduce-missing-barrier", "common/ops/cuda/reductions.cuh",
             [("  if (lane == 0) scratch[warp] = value;\n  __syncthreads();\n", "  if (lane == 0) scratch[warp] = value;\n")],
             "block_reduce: no barrier between writing and reading the per-warp results"),
    Mutation("column-sum-missing-barrier", "common/ops/cuda/reductions.cuh",
             [("      scratch[threadIdx.y][threadIdx.x] += scratch[threadIdx.y + stride][threadIdx.x];\n    __syncthreads();\n",
               "      scratch[threadIdx.y][threadIdx.x] += scratch[threadIdx.y + stride][threadIdx.x];\n")],
             "column_sum: no barrier between the steps of the tree"),
    Mutation("column-totals-overwrite", "common/ops/cuda/column_sums.cuh",
             [("out.sums[k][c] = out.add ? out.sums[k][c] + total : total;", "out.sums[k][c] = total;")],
             "column sums (bias, LayerNorm dw/db): = instead of += where they must add"),
    Mutation("column-totals-add-over-stale", "common/ops/cuda/column_sums.cuh",
             [("out.sums[k][c] = out.add ? out.sums[k][c] + total : total;", "out.sums[k][c] += total;")],
             "column sums (bias, LayerNorm dw/db): a parameter's first gradient of a step added into the stale one"),
    Mutation("weight-gradient-adds-over-stale", "common/ops/cuda/linear.cu",
             [("add_params ? 1.0f : 0.0f, dweight.raw()", "1.0f, dweight.raw()")],
             "linear backward: the weight gradient's GEMM adds into a stale gradient it should write over (beta 1)"),
    Mutation("gelu-backward-overwrite", "common/ops/cuda/gelu.cu",
             [("dx[i] = store_as<D>((add ? load(dx[i]) : 0.0f) + grad * load(dout[i]));",
               "dx[i] = store_as<D>((add ? 0.0f : 0.0f) + grad * load(dout[i]));")],
             "gelu backward: GradWrite::Add writes dx over instead of adding into it"),
    Mutation("residual-backward-overwrite", "common/ops/cuda/residual.cu",
             [("if (da) da[i] = store_as<D>(load(da[i]) + g);", "if (da) da[i] = store_as<D>(g);")],
             "residual backward: da = instead of da +="),
    Mutation("embedding-dwpe-overwrite", "common/ops/cuda/embedding.cu",
             [("dwpe[t * C + c] = add_dwpe ? dwpe[t * C + c] + position_sum : position_sum;",
               "dwpe[t * C + c] = position_sum;")],
             "embedding backward: dwpe = instead of dwpe +="),
    Mutation("embedding-dwpe-adds-over-stale", "common/ops/cuda/embedding.cu",
             [("dwpe[t * C + c] = add_dwpe ? dwpe[t * C + c] + position_sum : position_sum;",
               "dwpe[t * C + c] += position_sum;")],
             "embedding backward: wpe's first gradient of a step added into the stale one"),
    Mutation("embedding-no-atomic", "common/ops/cuda/embedding.cu",
             [("atomicAdd(&dwte[row * C + c], g);", "dwte[row * C + c] += g;")],
             "embedding backward: a plain += where two positions of one token race"),
    Mutation("adamw-no-bias-correction", "common/ops/cuda/adamw.cu",
             [("const float m_hat = mi / k.bias_correction1;", "const float m_hat = mi;")],
             "AdamW: first moment without bias correction"),
    Mutation("adamw-ignores-skip", "common/ops/cuda/adamw.cu",
             [("  if (!finite_value(scale)) return;\n", "")],
             "AdamW: a skipped step's NaN gradient scale updates the weights anyway"),
    Mutation("loss-scale-no-skip-mark", "common/ops/cuda/loss_scale.cu",
             [("  if (!finite) norm_and_scale[1] = CUDART_NAN_F;", "")],
             "loss scaling: an overflowing step's gradient scale not marked, so its update runs"),
    Mutation("flash-row-dot-half-group", "common/ops/cuda/flash_attention_tiles.cuh",
             [("for (int offset = lanes / 2; offset > 0; offset /= 2) sum +=",
               "for (int offset = lanes / 4; offset > 0; offset /= 2) sum +=")],
             "flash backward's D = rowsum(dO * O) by 16-byte pieces: only half of a row's lanes added"),
    Mutation("flash-no-sum-rescale", "common/ops/cuda/flash_attention_forward.cuh",
             [("      l[r][h] *= rescale[r][h];", "      l[r][h] *= 1.0f;")],
             "flash forward: the running sum not rescaled when the row max grows"),
    Mutation("flash-no-output-rescale", "common/ops/cuda/flash_attention_forward.cuh",
             [("for (int i = 0; i < 4; ++i) o[r][n][i] *= rescale[r][i / 2];",
               "for (int i = 0; i < 4; ++i) o[r][n][i] *= 1.0f;")],
             "flash forward: the running output not rescaled when the row max grows"),
    Mutation("flash-causal-off-by-one", "common/ops/cuda/flash_attention_forward.cuh",
             [("if (key > query || key >= s.T) sc[r][n][i] = -INFINITY;",
               "if (key > query + 1 || key >= s.T) sc[r][n][i] = -INFINITY;")],
             "flash forward: each query also sees the next key"),
    Mutation("flash-diagonal-tile-skipped", "common/ops/cuda/flash_attention_forward.cuh",
             [("  for (int kt = 0; kt <= last_key_tile; ++kt) {\n    // Key tile kt + 1",
               "  for (int kt = 0; kt < last_key_tile; ++kt) {\n    // Key tile kt + 1")],
             "flash forward: the key tile on the diagonal skipped with the masked ones"),
    Mutation("flash-diagonal-unmasked", "common/ops/cuda/flash_attention_forward.cuh",
             [("    } else if (s0 + kTile - 1 > query0 || s0 + kTile > s.T) {", "    } else if (false) {")],
             "flash forward: the diagonal key tile multiplied without its causal mask, as the tiles before it"),
    Mutation("flash-strips-share-a-bound", "common/ops/cuda/flash_attention_forward.cuh",
             [("if (kMasked && nn * 16 >= live_keys + r * kStrip) continue;",
               "if (kMasked && nn * 16 >= live_keys) continue;")],
             "flash forward with two strips a warp (the lab's v11): the second strip skips the keys only the first "
             "sees none of"),
    Mutation("flash-warp-skips-a-live-tile", "common/ops/cuda/flash_attention_forward.cuh",
             [("    if (s0 > warp_last_query) {", "    if (s0 >= query0) {")],
             "flash forward with two strips a warp (the lab's v11): a warp skips the key tile its queries start in"),
    Mutation("flash-waits-too-few", "common/ops/cuda/flash_attention_pipeline.cuh",
             [("  if (next_queued)\n    __pipeline_wait_prior(1);", "  if (next_queued)\n    __pipeline_wait_prior(2);")],
             "flash (every tile kernel): the tile about to be multiplied not waited for (cp.async still in flight)"),
    Mutation("flash-key-grads-causal", "common/ops/cuda/flash_attention_backward.cuh",
             [("if (query < key || query >= s.T) p[r][n][i] = 0.0f;",
               "if (query + 1 < key || query >= s.T) p[r][n][i] = 0.0f;")],
             "flash backward (dK, dV): each key also gets the gradient of the query before it"),
    Mutation("flash-query-grads-no-D", "common/ops/cuda/flash_attention_backward.cuh",
             [("ds[r][n][i] = prob * (ds[r][n][i] - row_D[r][i / 2]);", "ds[r][n][i] = prob * ds[r][n][i];")],
             "flash backward (dQ): dS without the D = rowsum(dO * O) term"),
    Mutation("flash-key-grads-no-D", "common/ops/cuda/flash_attention_backward.cuh",
             [("ds[r][n][i] = p[r][n][i] * (ds[r][n][i] - tile_D[c0 + frag_col(n, i)]);",
               "ds[r][n][i] = p[r][n][i] * ds[r][n][i];")],
             "flash backward (dK, dV): dS without the D = rowsum(dO * O) term"),
    Mutation("flash-key-strip-bound-off", "common/ops/cuda/flash_attention_fragments.cuh",
             [("        if (kSkip && col0 + nn * 16 + 16 <= live + r * kStrip) continue;\n        mma::mma_accumulate<E>(acc[r][2 * nn], a[r], b);",
               "        if (kSkip && col0 + nn * 16 + 16 <= live + 2 * r * kStrip) continue;\n        mma::mma_accumulate<E>(acc[r][2 * nn], a[r], b);")],
             "flash backward with two strips of keys a warp (the lab's v12): the second strip skips the 16 queries "
             "that see its first keys"),
    Mutation("flash-key-warp-skips-a-live-tile", "common/ops/cuda/flash_attention_backward.cuh",
             [("    if (t0 + kTile <= key0) {", "    if (t0 + kTile <= key0 + kWarpRows) {")],
             "flash backward (dK, dV): a warp skips the query tile its first keys lie in"),
    Mutation("flash-query-warp-skips-a-live-tile", "common/ops/cuda/flash_attention_backward.cuh",
             [("    if (s0 > warp_last_query) {", "    if (s0 >= query0) {")],
             "flash backward (dQ): a warp skips the key tile its queries start in"),
    Mutation("flash-key-tile-unmasked", "common/ops/cuda/flash_attention_backward.cuh",
             [("    } else if (t0 < warp_last_key || t0 + kTile > s.T) {", "    } else if (t0 < key0 || t0 + kTile > s.T) {")],
             "flash backward (dK, dV): a query tile that starts at the warp's first key taken as seen whole (the "
             "upper keys of the warp then get the gradients of earlier queries)"),
    Mutation("flash-wmma-no-sum-rescale", "ch09_advanced/kernels/01_attention/flash_wmma.cu",
             [("l = l * rescale + pair_sum(sum);", "l = l + pair_sum(sum);")],
             "attention lab v4 (WMMA) forward: the running sum not rescaled when the row max grows"),
    Mutation("flash-wmma-no-output-rescale", "ch09_advanced/kernels/01_attention/flash_wmma.cu",
             [("o_row[c] *= rescale;", "o_row[c] *= 1.0f;")],
             "attention lab v4 (WMMA) forward: the running output not rescaled when the row max grows"),
    Mutation("flash-wmma-causal-off-by-one", "ch09_advanced/kernels/01_attention/flash_wmma.cu",
             [("const float p = key <= t && key < s.T ? expf(", "const float p = key <= t + 1 && key < s.T ? expf(")],
             "attention lab v4 (WMMA) forward: each query also sees the next key"),
    Mutation("flash-wmma-diagonal-tile-skipped", "ch09_advanced/kernels/01_attention/flash_wmma.cu",
             [("kt <= last_key_tile; ++kt) {\n    const int s0 = kt * kTile;\n"
               "    __syncthreads();  // every warp is done with the previous K and V\n    load_tile<D>(k, q_head",
               "kt < last_key_tile; ++kt) {\n    const int s0 = kt * kTile;\n"
               "    __syncthreads();  // every warp is done with the previous K and V\n    load_tile<D>(k, q_head")],
             "attention lab v4 (WMMA) forward: the key tile on the diagonal skipped with the masked ones"),
    Mutation("flash-wmma-query-grads-no-D", "ch09_advanced/kernels/01_attention/flash_wmma.cu",
             [("p * (dp[at] - row_D)", "p * dp[at]")],
             "attention lab v4 (WMMA) backward (dQ): dS without the D term"),
    Mutation("classifier-pieces-tail-unread", "ch06_single_gpu/kernels/04_classifier/fused_classifier.cu",
             [("    add_piece(s, row[p], vocab - p * kPer);", "    (void)p;")],
             "ch06 fused classifier: the pieces past the registers left out of the max and sum"),
    Mutation("classifier-pieces-kept-unstored", "ch06_single_gpu/kernels/04_classifier/fused_classifier.cu",
             [("      row[p] = kept[i];", "      (void)kept[i];")],
             "ch06 fused classifier: the gradient of the pieces in registers never stored"),
    Mutation("column-pieces-wrong-column", "common/ops/cuda/column_sums.cuh",
             [("(t % kColumnWidth) * kPer + t / kColumnWidth;", "(t / kPer) + (t % kPer) * kColumnWidth;")],
             "column sums in 16-byte pieces (bias gradients): each total written to another column's place"),
    Mutation("flash-atomic-dq-unscaled", "ch09_advanced/kernels/01_attention/flash_backward_atomic.cu",
             [("s.scale * dq[(strip + r) * kLdOut<D> + c]", "dq[(strip + r) * kLdOut<D> + c]")],
             "attention lab v5: dQ added without its 1/sqrt(HS)"),
    Mutation("flash-one-pass-dq-unscaled", "common/ops/cuda/flash_attention_one_pass.cu",
             [("const float dq = scale * (e < kPer / 2 ? lo.e[e] : hi.e[e - kPer / 2]);",
               "const float dq = (scale > 0.0f ? 1.0f : 0.0f) * (e < kPer / 2 ? lo.e[e] : hi.e[e - kPer / 2]);")],
             "flash one-pass backward (lab v9): dQ written without its 1/sqrt(HS)"),
    Mutation("flash-one-pass-causal-off-by-one", "common/ops/cuda/flash_attention_one_pass.cu",
             [("if (query < key || query >= s.T) p[n][i] = 0.0f;", "if (query + 1 < key || query >= s.T) p[n][i] = 0.0f;")],
             "flash one-pass backward (lab v9): each key also gets the gradient of the query before it (dK, dV and dQ)"),
    Mutation("flash-one-pass-missing-barrier", "common/ops/cuda/flash_attention_one_pass.cu",
             [("    __syncthreads();  // the step's dS^T complete: each query's dQ needs every warp's keys\n", "")],
             "flash one-pass backward (lab v9): no barrier between the warps' dS^T stores and the dQ product that reads them"),
    Mutation("flash-one-pass-one-ds-buffer", "common/ops/cuda/flash_attention_one_pass.cu",
             [("uint32_t* step_ds = ds_steps + (c0 / kStep<D>) % 2 * step_words<D>();",
               "uint32_t* step_ds = ds_steps + 0 * step_words<D>();")],
             "flash one-pass backward (lab v9): one dS^T buffer for every step, refilled by a fast warp while a slow "
             "one still reads it (needs a warp far ahead: a shuffled schedule)", seed=1),
    Mutation("flash-one-pass-dq-diagonal-keys-skipped", "common/ops/cuda/flash_attention_one_pass.cu",
             [("t0 + c0 + rows + kStrip - s0 : kTile;", "t0 + c0 + rows - s0 : kTile;")],
             "flash one-pass backward (lab v9): dQ on the diagonal without the keys of the strip's own 16 positions"),
    Mutation("flash-one-pass-add-overwrites", "common/ops/cuda/flash_attention_one_pass.cu",
             [("store(q.e[e], add ? to_float(q.e[e]) + dq : dq);", "store(q.e[e], dq);")],
             "flash one-pass backward (lab v9): GradWrite::Add writes dQ over dqkv instead of adding into it"),
    Mutation("flash-timed-adds-twice", "common/ops/cuda/flash_attention.cu",
             [("backward_with(candidate, add ? timed_into : dqkv, dout", "backward_with(candidate, dqkv, dout")],
             "flash backward, FlashTiles::Timed: the timed runs write into dqkv where the call adds into it"),
    Mutation("flash-timed-under-capture", "common/ops/cuda/flash_attention.cu",
             [("  if (lab::cuda::capturing(stream)) return FlashTiles::Rows64;\n", "")],
             "FlashTiles::Timed: a shape first seen under stream capture is timed there (it waits for the stream)"),
    Mutation("flash-one-pass-workspace-unzeroed", "common/ops/cuda/flash_attention_one_pass.cu",
             [("const Tensor dq_sum = Tensor::zeros(", "const Tensor dq_sum = Tensor::empty(")],
             "flash one-pass backward (lab v9): the f32 dQ workspace not zero-filled before the atomics add into it"),
    Mutation("flash-wgmma-scores-not-waited", "ch09_advanced/kernels/01_attention/flash_wgmma.cu",
             [("  wg.commit();\n  wg.wait<0>();\n  wg.fence_operand<kTile>(sc[0]);", "  wg.commit();\n  wg.fence_operand<kTile>(sc[0]);")],
             "flash wgmma forward (lab v14): the softmax reads the scores' accumulator before the wait for S = Q K^T"),
    Mutation("flash-wgmma-no-fence-before-pv", "ch09_advanced/kernels/01_attention/flash_wgmma.cu",
             [("  wg.fence();  // o and p were written since the last wait\n", "")],
             "flash wgmma forward (lab v14): O += P V queued with no wgmma.fence after the softmax wrote o and P"),
    Mutation("flash-wgmma-k-major-strides-swapped", "ch09_advanced/kernels/01_attention/flash_wgmma.cu",
             [("tile + core_offset<D>(0, 16 * kk), wgmma::kCoreMatrixBytes, kRowGroupBytes<D>)",
               "tile + core_offset<D>(0, 16 * kk), kRowGroupBytes<D>, wgmma::kCoreMatrixBytes)")],
             "flash wgmma forward (lab v14): the Q and K descriptors with LBO and SBO swapped"),
    Mutation("flash-wgmma-v-read-k-major", "ch09_advanced/kernels/01_attention/flash_wgmma.cu",
             [("wg.mma_registers_a<E, D, BMajor::N>(", "wg.mma_registers_a<E, D, BMajor::K>(")],
             "flash wgmma forward (lab v14): the V tile read as a K-major B (imm-trans-b 0): V^T instead of V"),
    Mutation("flash-wgmma-refill-without-barrier", "ch09_advanced/kernels/01_attention/flash_wgmma.cu",
             [("    __syncthreads();  // every product of tile kt has been waited for: its buffers may be refilled\n", "")],
             "flash wgmma forward (lab v14): no barrier before the next tile's copies refill a buffer another warp "
             "may still be reading", seed=1),
    Mutation("wgmma-emulated-a-registers-swapped", "common/ops/cuda/warpgroup_mma.cuh",
             [("        a[g + 8][2 * t + h] = half(reg[1]);\n        a[g][2 * t + 8 + h] = half(reg[2]);",
               "        a[g + 8][2 * t + h] = half(reg[2]);\n        a[g][2 * t + 8 + h] = half(reg[1]);")],
             "emulated wgmma: the register A fragment's registers 1 and 2 swapped (rows g + 8 and columns 2 t + 8)"),
    Mutation("wgmma-emulated-scale-d-ignored", "common/ops/cuda/warpgroup_mma.cuh",
             [("  if (q.accumulate)\n    for (int lane", "  if (true)\n    for (int lane")],
             "emulated wgmma: scale-d 0 still adds the accumulator (D = A B + D instead of A B)"),
    Mutation("flash-wgmma-overlapped-p-overwritten-in-flight", "ch09_advanced/kernels/01_attention/flash_wgmma.cu",
             [("    pack_probs<E>(p_next, sc[0]);\n", "    pack_probs<E>(p, sc[0]);\n")],
             "flash wgmma forward, softmax overlapped (lab v15): the next tile's P packed into the registers the "
             "running P V still reads"),
    Mutation("flash-wgmma-overlapped-scores-not-waited", "ch09_advanced/kernels/01_attention/flash_wgmma.cu",
             [("    wg.wait<1>();  // S_kt;", "    wg.wait<2>();  // S_kt;")],
             "flash wgmma forward, softmax overlapped (lab v15): the softmax reads S before its products are done "
             "(wait_group 2 for 1)"),
    Mutation("flash-wgmma-overlapped-rescale-in-flight", "ch09_advanced/kernels/01_attention/flash_wgmma.cu",
             [("    uint32_t p_next[kTile / 16][4];\n", "    rescale_outputs<D, 1>(o, rescale);\n    uint32_t p_next[kTile / 16][4];\n"),
              ("    rescale_outputs<D, 1>(o, rescale);\n#pragma unroll", "#pragma unroll")],
             "flash wgmma forward, softmax overlapped (lab v15): O rescaled while the previous tile's P V still adds "
             "into it"),
    Mutation("flash-wgmma-overlapped-wrong-v-tile", "ch09_advanced/kernels/01_attention/flash_wgmma.cu",
             [("queue_probs_times_v<E, D>(wg, o[0], p, tiles.v(kt - 1));",
               "queue_probs_times_v<E, D>(wg, o[0], p, tiles.v(kt));")],
             "flash wgmma forward, softmax overlapped (lab v15): P_{kt-1} multiplied by V_kt"),
    Mutation("flash-wgmma-overlapped-refill-without-barrier", "ch09_advanced/kernels/01_attention/flash_wgmma.cu",
             [("    __syncthreads();  // every thread's copies have landed, and every thread is past its waits of tile "
               "kt - 1\n", "")],
             "flash wgmma forward, softmax overlapped (lab v15): no barrier between the copies' wait and the next "
             "tiles' refills", seed=1),
]


def run(command, cwd, log, env=None, timeout=None):
    """Runs a command, appending its output to `log`; returns the exit status (None on timeout)."""
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(map(str, command))}\n")
        out.flush()
        try:
            return subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return None


def tracked_files():
    """The files of the working tree that git tracks or would track (not ignored), relative paths."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=True)
    return [p for p in listed.stdout.split("\0") if p and (ROOT / p).is_file()]


def refresh_copy(src):
    """Makes `src` a copy of the working tree (only changed files are rewritten, keeping the build incremental).

    A rewritten file gets the time of the copy, not the original's (shutil.copy, not copy2): an original edited
    before the copy's last build would otherwise look older than its objects, and ninja would not rebuild them.
    """
    wanted = set(tracked_files())
    for rel in wanted:
        target = src / rel
        if not target.exists() or not filecmp.cmp(ROOT / rel, target, shallow=False):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / rel, target)
    for path in src.rglob("*"):
        if path.is_file() and str(path.relative_to(src)) not in wanted:
            path.unlink()


def build(src, build_dir, log, jobs, programs):
    if not (build_dir / "build.ninja").exists():
        status = run(["cmake", "-S", src, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                      "-DLAB_CUDA_EMULATION=ON"], ROOT, log)
        if status != 0:
            return False
    return run(["ninja", "-C", build_dir, f"-j{jobs}", *programs], ROOT, log) == 0


# "[  FAILED  ] Suite.Name" or "[  FAILED  ] Prefix/Suite.Name/3, where GetParam() = ..." (not the summary
# line "[  FAILED  ] 2 tests, listed below:").
FAILED = re.compile(r"^\[  FAILED  \] ([A-Za-z_][\w/.]*)", re.M)


def run_tests(build_dir, log, seed, programs):
    """Runs the test programs; returns the names of the failed tests (or a note for a crash or a hang)."""
    env = dict(os.environ)
    if seed is not None:
        env["LAB_EMU_SEED"] = str(seed)
    failed = []
    for program in programs:
        program_log = build_dir / f"{program}.log"
        program_log.write_text("")
        status = run([build_dir / "bin" / program], build_dir, program_log, env=env, timeout=TEST_TIMEOUT_S)
        text = program_log.read_text()
        with open(log, "a") as out:
            out.write(text)
        names = sorted(set(FAILED.findall(text)))
        if status is None:
            names.append(f"{program}: hung (killed after {TEST_TIMEOUT_S} s)")
        elif status < 0 or (status != 0 and not names):
            names.append(f"{program}: crashed (status {status})")
        failed += names
    return failed


def apply(mutation, src):
    path = src / mutation.path
    original = path.read_text()
    text = original
    for old, new in mutation.edits:
        count = text.count(old)
        if count != 1:
            raise SystemExit(f"kernel_mutations: {mutation.name}: the text to replace occurs {count} times in "
                             f"{mutation.path} (expected once); update MUTATIONS")
        text = text.replace(old, new)
    path.write_text(text)
    return original


def summary(failed, shown=3):
    if not failed:
        return "**not caught**"
    listed = ", ".join(f"`{name}`" for name in failed[:shown])
    more = f" and {len(failed) - shown} more" if len(failed) > shown else ""
    return f"{len(failed)}: {listed}{more}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT.parent / "build-mutations",
                        help="the private copy and its build (default: build-mutations/ beside the repository)")
    parser.add_argument("--only", action="append", help="run only this mutation (repeatable)")
    parser.add_argument("--seed", type=int, help="LAB_EMU_SEED for the test runs (shuffled schedules)")
    parser.add_argument("--program", action="append", choices=TEST_PROGRAMS,
                        help="build and run only this test program (repeatable; default: all of them)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel build jobs")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args()

    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    programs = args.program or TEST_PROGRAMS
    unknown = set(args.only or []) - {m.name for m in MUTATIONS}
    if unknown:
        print(f"kernel_mutations: unknown mutation(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    src, build_dir, log = args.work / "src", args.work / "build", args.work / "mutations.log"
    src.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    refresh_copy(src)

    started = time.time()
    if not build(src, build_dir, log, args.jobs, programs):
        print(f"kernel_mutations: the unmutated build failed; see {log}", file=sys.stderr)
        return 2
    baseline = run_tests(build_dir, log, args.seed, programs)
    if baseline:
        print(f"kernel_mutations: the unmutated tests fail ({', '.join(baseline)}); see {log}", file=sys.stderr)
        return 2

    rows, missed = [], []
    for mutation in chosen:
        original = apply(mutation, src)
        try:
            if not build(src, build_dir, log, args.jobs, programs):
                print(f"kernel_mutations: {mutation.name} does not build; see {log}", file=sys.stderr)
                return 2
            failed = run_tests(build_dir, log, args.seed if args.seed is not None else mutation.seed, programs)
        finally:
            (src / mutation.path).write_text(original)
        if not failed:
            missed.append(mutation.name)
        rows.append(f"| `{mutation.name}` | {mutation.path} | {mutation.what} | {summary(failed)} |")
        print(f"{mutation.name}: {len(failed)} failing test(s)", file=sys.stderr)
    build(src, build_dir, log, args.jobs, programs)  # leave the copy's build unmutated

    seed_note = f", LAB_EMU_SEED={args.seed}" if args.seed is not None else ""
    table = "\n".join([
        f"Mutations of the CUDA kernels against {' and '.join(programs)} in the emulation build "
        f"({time.time() - started:.0f} s{seed_note}):",
        "",
        "| mutation | file | what it breaks | failing tests |",
        "| --- | --- | --- | --- |",
        *rows,
    ])
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
