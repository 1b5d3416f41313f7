// Chapter 9 on CUDA: the flash attention kernels (common/ops/cuda/flash_attention.cu) in bf16 and f16 against
// the fp64 reference by the low-precision rule (their error within 4x that of the straightforward same-precision
// computation), at shapes off the 64-row tiles and head sizes the kernels pad (32, 8); that the backward adds into
// dqkv; the one-pass backward (FlashBackward::OnePass, the lab's v9) at the same shapes, writing and adding; the lab's
// forwards on Hopper's wgmma (v14, v15) at the same shapes; the attention lab's GPU versions; the f32 fallback to the
// materialised op; that the 16-bit path holds no T x T buffer; and the head sizes it refuses. Labels ch09 and cuda:
// they run in the emulation build (so the shapes are tiny) and skip without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ch09_advanced/kernels/01_attention/attention_lab.h"
#include "ch09_advanced/kernels/01_attention/flash_versions.h"
#include "common/core/memory.h"
#include "common/cuda/caching_allocator.h"
#include "common/cuda/graph.h"
#include "common/cuda/stream.h"
#include "common/lab/compare.h"
#include "common/ops/flash_attention.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/ch09_advanced/flash_cases.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/expect_error.h"
#include "tests/support/op_check.h"

namespace lab {
namespace {

using test::FlashCase;
using test::FlashInputs;
using test::kGpu;

uint64_t test_seed() {
  return std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

struct GpuCase {
  FlashCase shape;
  DType dtype;
  std::string name() const { return shape.name() + "_" + dtype_name(dtype); }
};

void PrintTo(const GpuCase& c, std::ostream* os) {
  *os << c.name();
}

// T = 1; T off the tile (65, 70) and over two tiles (130); 1 to 16 heads; head sizes 64 and 128 (the kernels'
// widths) and 32 and 8 (zero-padded to 64); scores of std 64 (spread 8).
const GpuCase kCases[] = {
    {{1, 1, 1, 64}, DType::BF16},  {{2, 65, 2, 64}, DType::BF16}, {{1, 130, 1, 128}, DType::BF16},
    {{1, 70, 3, 32}, DType::BF16}, {{1, 33, 16, 8}, DType::BF16}, {{1, 70, 1, 64, 8.0f}, DType::BF16},
    {{1, 130, 2, 64}, DType::F16}, {{2, 17, 1, 128}, DType::F16}, {{1, 70, 1, 64, 8.0f}, DType::F16},
    {{1, 33, 3, 12}, DType::BF16}};  // C = 36: no 16-byte pieces of a row (the one pass's element-wise dQ kernel)

class FlashGpu : public ::testing::TestWithParam<GpuCase> {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

TEST_P(FlashGpu, WithinLowPrecisionRuleOfReference) {
  const GpuCase p = GetParam();
  const FlashCase& c = p.shape;
  Rng rng(test_seed());
  FlashInputs in = test::rounded_to(test::random_flash_inputs(c, rng), p.dtype);
  in.dqkv_before = Tensor::zeros(in.qkv.shape(), DType::F32);
  const test::AttentionResult flash = test::run_flash(in, c.NH, p.dtype, kGpu);
  const ch09::ReferenceForward exact = ch09::reference_forward(c.shape(), in.qkv);
  const Tensor exact_dqkv = ch09::reference_backward(c.shape(), in.qkv, in.dout);
  const ch09::ReferenceForward baseline = ch09::reference_forward(c.shape(), in.qkv, p.dtype);
  const Tensor baseline_dqkv = ch09::reference_backward(c.shape(), in.qkv, in.dout, p.dtype);
  for (const auto& [what, actual, base, accurate] : {std::tuple{"out", flash.out, baseline.out, exact.out},
                                                     std::tuple{"dqkv", flash.dqkv, baseline_dqkv, exact_dqkv}}) {
    const ErrorRatioReport r = compare_error_to_baseline(actual, base, accurate, p.dtype);
    EXPECT_TRUE(r.ok()) << r.describe(what);
  }
  const Tolerance tol = tolerance_for_offset(DType::F32, std::max(c.T, c.HS), 4.0 * c.spread * c.spread);
  EXPECT_TRUE(test::all_close("lse", flash.lse, exact.lse, tol));
}

// a + b, elementwise, of two f32 CPU tensors of one shape.
Tensor sum_of(const Tensor& a, const Tensor& b) {
  std::vector<float> sum = a.to_floats();
  const std::vector<float> other = b.to_floats();
  for (size_t i = 0; i < sum.size(); ++i) sum[i] += other[i];
  return Tensor::from_floats(sum, a.shape());
}

// The one-pass backward (FlashBackward::OnePass, the attention lab's v9: one pass over key tiles, dQ by atomics into
// an f32 workspace, on the core's register kernels) after the core's forward, at the same shapes: written over NaNs
// (GradWrite::Overwrite: an element its conversion pass or the dK/dV stores missed stays NaN) and added into random
// values (Add), each by the low-precision rule. For Add the exact result is dqkv_before + the exact gradient and the
// baseline the same-precision gradient added to dqkv_before and rounded once more, as any 16-bit accumulation rounds
// it.
TEST_P(FlashGpu, OnePassAtomicDqWithinLowPrecisionRule) {
  const GpuCase p = GetParam();
  const FlashCase& c = p.shape;
  Rng rng(test_seed());
  const FlashInputs in = test::rounded_to(test::random_flash_inputs(c, rng), p.dtype);
  const Tensor exact = ch09::reference_backward(c.shape(), in.qkv, in.dout);
  const Tensor baseline = ch09::reference_backward(c.shape(), in.qkv, in.dout, p.dtype);
  for (const ops::GradWrite write : {ops::GradWrite::Overwrite, ops::GradWrite::Add}) {
    const bool add = write == ops::GradWrite::Add;
    SCOPED_TRACE(add ? "Add" : "Overwrite");
    const Tensor dqkv = test::run_flash(in, c.NH, p.dtype, kGpu, write, ops::FlashBackward::OnePass).dqkv;
    const Tensor base = add ? sum_of(in.dqkv_before, baseline).to_dtype(p.dtype).to_dtype(DType::F32) : baseline;
    const ErrorRatioReport r =
        compare_error_to_baseline(dqkv, base, add ? sum_of(in.dqkv_before, exact) : exact, p.dtype);
    EXPECT_TRUE(r.ok()) << r.describe("dqkv");
  }
}

// The attention lab's v14 and v15, the forward on Hopper's warpgroup products (flash_wgmma.cu; v15 with each
// tile's softmax beside the previous tile's P V), at the same shapes, their outputs poisoned first, by the same rule;
// lse within f32's tolerance. Skips where wgmma cannot run.
TEST_P(FlashGpu, WgmmaForwardsWithinLowPrecisionRuleOfReference) {
  if (!ch09::attention_lab::flash_wgmma_runs_here()) GTEST_SKIP() << "wgmma needs a compute capability 9.0 GPU";
  const GpuCase p = GetParam();
  const FlashCase& c = p.shape;
  Rng rng(test_seed());
  const FlashInputs in = test::rounded_to(test::random_flash_inputs(c, rng), p.dtype);
  const ch09::ReferenceForward exact = ch09::reference_forward(c.shape(), in.qkv);
  const ch09::ReferenceForward baseline = ch09::reference_forward(c.shape(), in.qkv, p.dtype);
#ifdef LAB_CUDA_EMULATION
  const test::AttentionResult v7 = test::run_flash(in, c.NH, p.dtype, kGpu);
#endif
  for (const bool overlapped : {false, true}) {
    SCOPED_TRACE(overlapped ? "v15, softmax overlapped" : "v14");
    const Tensor out = poisoned({c.B, c.T, c.NH * c.HS}, Device::cpu()).to_dtype(p.dtype).to(kGpu);
    const Tensor lse = poisoned({c.B, c.NH, c.T}, kGpu);
    const Tensor qkv = in.qkv.to_dtype(p.dtype).to(kGpu);
    if (overlapped)
      ch09::attention_lab::flash_wgmma_overlapped_forward(out, lse, qkv, static_cast<int>(c.NH));
    else
      ch09::attention_lab::flash_wgmma_forward(out, lse, qkv, static_cast<int>(c.NH));
    const ErrorRatioReport r =
        compare_error_to_baseline(out.to(Device::cpu()).to_dtype(DType::F32), baseline.out, exact.out, p.dtype);
    EXPECT_TRUE(r.ok()) << r.describe("out");
    const Tolerance tol = tolerance_for_offset(DType::F32, std::max(c.T, c.HS), 4.0 * c.spread * c.spread);
    EXPECT_TRUE(test::all_close("lse", lse, exact.lse, tol));
#ifdef LAB_CUDA_EMULATION
    // The emulator sums each product in k order, as it does mma.sync's, and both apply v7's operations to O in v7's
    // order: v7's bits there (not on a GPU).
    EXPECT_EQ(out.to(Device::cpu()).to_dtype(DType::F32).to_floats(),
              v7.out.to(Device::cpu()).to_dtype(DType::F32).to_floats());
    EXPECT_EQ(lse.to(Device::cpu()).to_floats(), v7.lse.to(Device::cpu()).to_floats());
#endif
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashGpu, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name(); });

// The attention lab's GPU versions (the materialised op, the WMMA flash kernels, in the backward the one-pass
// backward with dQ by atomics, the v6 kernels that load each tile before multiplying it, the core's, the 16-bit
// batched op, in the backward the one pass with dQ by atomics on the core's kernels, the core's forward kernel with
// 128-query tiles, the core's backward kernels on 128-row tiles, in steps of 32 and 16 queries, the forward by wgmma
// where it runs), bf16 and f16, against its fp64 reference.
TEST(AttentionLabGpu, GpuVersionsPass) {
  LAB_REQUIRE_GPU();
  for (const auto& [shape, dtype] : {std::pair{ch09::AttentionShape{1, 70, 2, 64}, DType::BF16},
                                     std::pair{ch09::AttentionShape{2, 65, 1, 64}, DType::BF16},
                                     std::pair{ch09::AttentionShape{1, 130, 2, 128}, DType::F16}}) {
    for (const ch09::LabPass pass : {ch09::LabPass::Forward, ch09::LabPass::Backward}) {
      const kernel_lab::KernelLab lab = ch09::make_attention_lab({shape, dtype, test_seed()}, pass);
      const std::vector<int> gpu = test::versions_on(lab, DeviceType::CUDA);
      const size_t wgmma = ch09::attention_lab::flash_wgmma_runs_here() ? 2 : 0;  // left out elsewhere
      ASSERT_EQ(gpu.size(), 10u + wgmma)
          << "materialised, flash through WMMA, dQ by atomics, flash in registers, the core's, batched in 16 bits, dQ "
             "by atomics in registers, 128-query tiles, 128-row tiles in the backward, the same in steps of 16 "
             "queries, and on Hopper the forward by wgmma, alone and with the softmax overlapped";
      for (const int n : gpu) EXPECT_TRUE(test::version_passes(lab, n));
    }
  }
}

// The bits of a float tensor (NaN included, so that an element left unwritten in both is no match).
std::vector<uint32_t> bits_of(const Tensor& t) {
  const std::vector<float> values = t.to(Device::cpu()).to_dtype(DType::F32).to_floats();
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

// The kernel sets of ops::FlashTiles give the bits of Rows64 (the lab's v7). Rows128 (v11 forward, v12 backward):
// two strips of 16 rows a warp, 128-query tiles forward, 128-key tiles for dK and dV and 128-query tiles for dQ;
// Rows128Steps16 (v13) with the dK/dV kernel in steps of 16 queries; per query and per key the same tiles, products
// and softmax steps in the same order. Timed, whichever it picks. At T = 1, T inside one 128-row tile with its upper
// warps' rows all past T (65, 70), T past one or two 128-row tiles by a row or less than a tile (129, 200, 257),
// head sizes 64 and the narrower ones padded to it (32, 8), scores of std 64, f16; at head size 128 every set is one
// strip (the same kernels). The backward from the same forward's out and lse, adding into the same random dqkv
// (Timed then times into a workspace) and writing over NaNs (Timed times into dqkv itself).
const std::pair<FlashCase, DType> kTileCases[] = {
    {FlashCase{1, 1, 1, 64}, DType::BF16},        {FlashCase{1, 65, 2, 64}, DType::BF16},
    {FlashCase{2, 129, 2, 64}, DType::BF16},      {FlashCase{1, 200, 3, 32}, DType::BF16},
    {FlashCase{1, 257, 1, 64, 8.0f}, DType::F16}, {FlashCase{1, 70, 2, 8}, DType::BF16},
    {FlashCase{1, 130, 1, 128}, DType::BF16}};
const ops::FlashTiles kOtherTiles[] = {ops::FlashTiles::Rows128, ops::FlashTiles::Rows128Steps16,
                                       ops::FlashTiles::Timed};

TEST(FlashGpuTiles, ForwardGivesTheBitsOfRows64) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  for (const auto& [shape, element] : kTileCases) {
    const FlashCase c = shape;  // copies: a lambda may not capture a structured binding on every compiler (clang 16)
    const DType dtype = element;
    SCOPED_TRACE(c.name() + "_" + dtype_name(dtype));
    const FlashInputs in = test::random_flash_inputs(c, rng);
    const Tensor qkv = in.qkv.to_dtype(dtype).to(kGpu);
    const auto forward = [&](ops::FlashTiles tiles) {
      const Tensor out = poisoned({c.B, c.T, c.NH * c.HS}, Device::cpu()).to_dtype(dtype).to(kGpu);
      const Tensor lse = poisoned({c.B, c.NH, c.T}, kGpu);
      ops::flash_attention_forward(out, lse, qkv, static_cast<int>(c.NH), tiles);
      return std::pair{bits_of(out), bits_of(lse)};
    };
    const auto [rows64_out, rows64_lse] = forward(ops::FlashTiles::Rows64);
    for (const ops::FlashTiles tiles : kOtherTiles) {
      const auto [out, lse] = forward(tiles);
      EXPECT_EQ(out, rows64_out) << ops::flash_tiles_name(tiles);
      EXPECT_EQ(lse, rows64_lse) << ops::flash_tiles_name(tiles);
    }
  }
}

TEST(FlashGpuTiles, BackwardGivesTheBitsOfRows64) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  for (const auto& [shape, element] : kTileCases) {
    const FlashCase c = shape;  // copies, as above
    const DType dtype = element;
    SCOPED_TRACE(c.name() + "_" + dtype_name(dtype));
    const FlashInputs in = test::random_flash_inputs(c, rng);
    const Tensor qkv = in.qkv.to_dtype(dtype).to(kGpu), dout = in.dout.to_dtype(dtype).to(kGpu);
    const Tensor out = Tensor::empty({c.B, c.T, c.NH * c.HS}, dtype, kGpu);
    const Tensor lse = Tensor::empty({c.B, c.NH, c.T}, DType::F32, kGpu);
    ops::flash_attention_forward(out, lse, qkv, static_cast<int>(c.NH));
    const auto backward = [&](ops::FlashTiles tiles, ops::GradWrite write) {
      const Tensor dqkv = write == ops::GradWrite::Add ? in.dqkv_before.to_dtype(dtype).to(kGpu)
                                                       : poisoned(qkv.shape(), Device::cpu()).to_dtype(dtype).to(kGpu);
      ops::flash_attention_backward(dqkv, dout, qkv, out, lse, static_cast<int>(c.NH), write,
                                    ops::FlashBackward::TwoPasses, tiles);
      return bits_of(dqkv);
    };
    for (const ops::GradWrite write : {ops::GradWrite::Add, ops::GradWrite::Overwrite}) {
      SCOPED_TRACE(write == ops::GradWrite::Add ? "add" : "overwrite");
      const std::vector<uint32_t> rows64 = backward(ops::FlashTiles::Rows64, write);
      for (const ops::FlashTiles tiles : kOtherTiles)
        EXPECT_EQ(backward(tiles, write), rows64) << ops::flash_tiles_name(tiles);
    }
  }
}

// The lines of flash_tile_choices() that name `shape` (shape_line's text).
std::vector<std::string> choices_naming(const std::string& shape) {
  std::vector<std::string> lines;
  for (const std::string& line : ops::flash_tile_choices())
    if (line.find(shape) != std::string::npos) lines.push_back(line);
  return lines;
}

// Timed times a shape once, forward and backward apart, and reports each choice with every set's time; a shape
// of heads wider than 64 (one set) is not timed. The shapes are this test's own (no other test uses B = 3, T = 77).
TEST(FlashGpuTiles, TimedChoosesOncePerShapeAndPassAndSaysWhat) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  for (const int64_t hs : {int64_t{64}, int64_t{128}}) {
    const FlashCase c{3, 77, 2, hs};
    const FlashInputs in = test::random_flash_inputs(c, rng);
    const Tensor qkv = in.qkv.to_dtype(DType::BF16).to(kGpu), dout = in.dout.to_dtype(DType::BF16).to(kGpu);
    const Tensor out = Tensor::empty({c.B, c.T, c.NH * c.HS}, DType::BF16, kGpu);
    const Tensor lse = Tensor::empty({c.B, c.NH, c.T}, DType::F32, kGpu);
    const Tensor dqkv = Tensor::zeros(qkv.shape(), DType::BF16, kGpu);
    for (int call = 0; call < 2; ++call) {
      ops::flash_attention_forward(out, lse, qkv, 2, ops::FlashTiles::Timed);
      ops::flash_attention_backward(dqkv, dout, qkv, out, lse, 2, ops::GradWrite::Overwrite,
                                    ops::FlashBackward::TwoPasses, ops::FlashTiles::Timed);
    }
    const std::string shape = cat("bf16 B 3 x 2 heads x T 77, head size ", hs, ": ");
    const std::vector<std::string> forward = choices_naming("flash forward " + shape),
                                   backward = choices_naming("flash backward " + shape);
    if (hs > 64) {
      EXPECT_TRUE(forward.empty() && backward.empty()) << "one set at head size 128: nothing to time";
      continue;
    }
    ASSERT_EQ(forward.size(), 1u) << "timed once, however many calls";
    ASSERT_EQ(backward.size(), 1u);
    for (const char* name : {"rows 64: ", "rows 128: "}) {
      EXPECT_NE(forward[0].find(name), std::string::npos) << forward[0];
      EXPECT_NE(backward[0].find(name), std::string::npos) << backward[0];
    }
    EXPECT_EQ(forward[0].find("steps of 16"), std::string::npos) << "the forward has two sets: " << forward[0];
    EXPECT_NE(backward[0].find("rows 128, steps of 16: "), std::string::npos) << backward[0];
  }
}

// Under stream capture nothing can be timed: a shape not yet timed runs Rows64, queues no synchronisation (a
// synchronising call would fail the capture, on a GPU and in the emulator alike) and is not reported, and the graph's
// replay gives Rows64's bits. The shape is this test's own (B = 2, T = 91).
TEST(FlashGpuTiles, TimedUnderCaptureRunsRows64WithoutTiming) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  const FlashCase c{2, 91, 2, 64};
  const FlashInputs in = test::random_flash_inputs(c, rng);
  const Tensor qkv = in.qkv.to_dtype(DType::BF16).to(kGpu), dout = in.dout.to_dtype(DType::BF16).to(kGpu);
  struct Buffers {
    Tensor out, lse, dqkv;
  };
  const auto buffers = [&] {
    return Buffers{Tensor::zeros({c.B, c.T, c.NH * c.HS}, DType::BF16, kGpu),
                   Tensor::zeros({c.B, c.NH, c.T}, DType::F32, kGpu), Tensor::zeros(qkv.shape(), DType::BF16, kGpu)};
  };
  const auto run = [&](const Buffers& b, ops::FlashTiles tiles) {
    ops::flash_attention_forward(b.out, b.lse, qkv, 2, tiles);
    ops::flash_attention_backward(b.dqkv, dout, qkv, b.out, b.lse, 2, ops::GradWrite::Overwrite,
                                  ops::FlashBackward::TwoPasses, tiles);
  };
  const Buffers eager = buffers(), graphed = buffers();
  run(eager, ops::FlashTiles::Rows64);
  // The backward's workspace (its D rows) comes from a private pool that a warm-up run filled, as the graphed step's.
  const int pool = cuda::create_private_pool(kGpu.index);
  {
    const cuda::Stream stream;
    const cuda::StreamGuard on(stream);
    const cuda::PoolScope in_pool(kGpu.index, pool);
    run(graphed, ops::FlashTiles::Rows64);
    cuda::Graph graph;
    graph.capture(stream, [&] { run(graphed, ops::FlashTiles::Timed); });
    EXPECT_TRUE(choices_naming("B 2 x 2 heads x T 91,").empty()) << "a shape timed under capture";
    for (const Tensor* t : {&graphed.out, &graphed.lse, &graphed.dqkv}) t->zero_();  // what the warm-up wrote
    graph.launch(stream);
    stream.synchronize();
  }
  cuda::release_private_pool(kGpu.index, pool);
  EXPECT_EQ(bits_of(graphed.out), bits_of(eager.out));
  EXPECT_EQ(bits_of(graphed.lse), bits_of(eager.lse));
  EXPECT_EQ(bits_of(graphed.dqkv), bits_of(eager.dqkv));
}

// The backward adds into dqkv: from random values it ends at those values plus the gradient from zero (each sum
// rounded once more to bf16).
TEST(FlashGpuAccumulation, BackwardAddsIntoDqkv) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  const FlashCase c{1, 70, 2, 64};
  FlashInputs in = test::rounded_to(test::random_flash_inputs(c, rng), DType::BF16);
  const Tensor before = in.dqkv_before;
  const test::AttentionResult added = test::run_flash(in, c.NH, DType::BF16, kGpu);
  in.dqkv_before = Tensor::zeros(before.shape(), DType::F32);
  const std::vector<float> alone = test::run_flash(in, c.NH, DType::BF16, kGpu).dqkv.to_floats(),
                           initial = before.to_floats();
  std::vector<float> sum(alone.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = initial[i] + alone[i];
  const double eps = dtype_epsilon(DType::BF16);
  EXPECT_TRUE(test::all_close("dqkv", added.dqkv, Tensor::from_floats(sum, before.shape()), {eps, eps}));
}

// GradWrite::Overwrite: from a dqkv of NaNs, every element written by the dK/dV and dQ kernels and none read, the
// same bits as adding into zeros (0 + x rounds to x), at a T that ends mid-tile and with a head narrower than the
// kernels' 64 columns; the f32 fallback (the materialised backward adds) zero-fills first.
TEST(FlashGpuAccumulation, OverwriteWritesEveryElementAsAddingIntoZeros) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  for (const FlashCase& c : {FlashCase{1, 70, 2, 64}, FlashCase{2, 33, 3, 48}}) {
    SCOPED_TRACE(c.name());
    FlashInputs in = test::random_flash_inputs(c, rng);
    in.dqkv_before = Tensor::zeros(in.qkv.shape(), DType::F32);
    for (const DType dtype : {DType::BF16, DType::F32}) {
      SCOPED_TRACE(dtype_name(dtype));
      const FlashInputs rounded = dtype == DType::F32 ? in : test::rounded_to(in, dtype);
      const Tensor added = test::run_flash(rounded, c.NH, dtype, kGpu).dqkv;
      const Tensor written = test::run_flash(rounded, c.NH, dtype, kGpu, ops::GradWrite::Overwrite).dqkv;
      EXPECT_EQ(written.to_floats(), added.to_floats());
    }
  }
}

// f32 inputs take the materialised path: the same results as the CPU flash attention, within f32's tolerance.
TEST(FlashGpuFallback, F32MatchesCpuFlash) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  const FlashCase c{2, 70, 3, 16};
  const FlashInputs in = test::random_flash_inputs(c, rng);
  const test::AttentionResult gpu = test::run_flash(in, c.NH, DType::F32, kGpu);
  const test::AttentionResult cpu = test::run_flash(in, c.NH, DType::F32, Device::cpu());
  const Tolerance tol = tolerance_for(DType::F32, c.T);
  EXPECT_TRUE(test::all_close("out", gpu.out, cpu.out, tol));
  EXPECT_TRUE(test::all_close("lse", gpu.lse, cpu.lse, tol));
  EXPECT_TRUE(test::all_close("dqkv", gpu.dqkv, cpu.dqkv, tol));
}

// Memory linear in T on the GPU allocator too: at T = 512 one head's bf16 T x T matrix is 512 KiB; the 16-bit
// forward and backward together may add an eighth of it (they add D, 2 KiB), while the f32 fallback's
// probabilities are the whole f32 matrix (checked, so that the measurement is known to see such a buffer).
TEST(FlashGpuMemory, SixteenBitPathAllocatesNoTxTBuffer) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  const FlashCase c{1, 512, 1, 64};
  const FlashInputs in = test::random_flash_inputs(c, rng);
  const auto peak_growth = [](const Tensor& qkv, const Tensor& dout) {
    const Tensor out = Tensor::empty(dout.shape(), qkv.dtype(), kGpu),
                 lse = Tensor::empty({1, 1, 512}, DType::F32, kGpu);
    const Tensor dqkv = Tensor::zeros(qkv.shape(), qkv.dtype(), kGpu);
    Allocator& allocator = allocator_for(kGpu);
    allocator.reset_peak();
    const int64_t before = allocator.stats().live_total;
    ops::flash_attention_forward(out, lse, qkv, 1);
    ops::flash_attention_backward(dqkv, dout, qkv, out, lse, 1);
    return allocator.stats().peak_total - before;
  };
  const int64_t bf16 = peak_growth(in.qkv.to_dtype(DType::BF16).to(kGpu), in.dout.to_dtype(DType::BF16).to(kGpu));
  const int64_t f32 = peak_growth(in.qkv.to(kGpu), in.dout.to(kGpu));
  EXPECT_LT(bf16, c.T * c.T * 2 / 8) << "the bf16 flash forward + backward grew the peak by " << bf16 << " bytes";
  EXPECT_GE(f32, c.T * c.T * 4);
}

TEST(FlashGpuArguments, HeadsWiderThan128AreUnsupportedIn16Bit) {
  LAB_REQUIRE_GPU();
  const Tensor qkv = Tensor::zeros({1, 4, 3 * 160}, DType::BF16, kGpu);
  const Tensor out = Tensor::zeros({1, 4, 160}, DType::BF16, kGpu), lse = Tensor::zeros({1, 1, 4}, DType::F32, kGpu);
  testing::expect_error([&] { ops::flash_attention_forward(out, lse, qkv, 1); }, ErrorKind::Unsupported,
                        {"head size 160"});
}

}  // namespace
}  // namespace lab
