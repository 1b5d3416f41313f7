// ch06_layernorm_lab: the residual add + LayerNorm versions side by side (see layernorm_lab.h), forward or
// backward, each validated against the CPU reference and then timed.
//
//   ch06_layernorm_lab                                  forward, N = 8192 rows, C = 768 (GPT-2 d12, B*T = 8192)
//   ch06_layernorm_lab --pass backward --repeats 50
//   ch06_layernorm_lab --offset 10000 --validate-only   rows with mean 1e4 and std 1
#include <cstdio>
#include <string>

#include "ch06_single_gpu/kernels/02_layernorm/layernorm_lab.h"
#include "common/core/device.h"
#include "common/core/error.h"
#include "common/lab/lab_main.h"
#include "common/util/flags.h"
#include "common/util/main.h"

namespace {

int run(int argc, char** argv) {
  lab::ch06::LayerNormProblem problem;
  std::string pass = "forward";
  double offset = problem.offset, spread = problem.spread;
  int64_t seed = static_cast<int64_t>(problem.seed);
  lab::Flags flags("ch06_layernorm_lab", "Residual add + LayerNorm: the versions side by side, validated then timed");
  flags.add_choice("pass", &pass, {"forward", "backward"}, "which pass to run");
  flags.add_int("rows", &problem.rows, "rows N = B*T", 1, int64_t{1} << 22);
  flags.add_int("channels", &problem.channels, "channels C (GPT-2: 768, 1024, 1280, 1600)", 1, int64_t{1} << 16);
  flags.add_float("offset", &offset, "mean of the input rows (1e4 punishes a one-pass variance)", -1e6, 1e6);
  flags.add_float("spread", &spread, "standard deviation of the inputs", 1e-3, 1e3);
  flags.add_int("seed", &seed, "seed of the random inputs", 0);
  lab::kernel_lab::LabCommandLine lab_flags;
  lab_flags.register_flags(flags);
  if (!lab_flags.parse(flags, argc, argv)) return 0;
  lab_flags.quick_size(flags, "rows", problem.rows, int64_t{1024});
  LAB_CHECK(problem.rows * problem.channels <= (int64_t{1} << 27), InvalidArgument,
            "--rows x --channels = ", problem.rows * problem.channels, " elements is more than this lab holds (2^27)");
  problem.offset = static_cast<float>(offset);
  problem.spread = static_cast<float>(spread);
  problem.seed = static_cast<uint64_t>(seed);
  if (!lab::cuda_available()) std::printf("no CUDA device visible: only the CPU versions run\n");
  const lab::kernel_lab::KernelLab lab = lab::ch06::make_layernorm_lab(
      problem, pass == "forward" ? lab::ch06::LabPass::Forward : lab::ch06::LabPass::Backward);
  return lab::kernel_lab::run_lab(lab, lab_flags);
}

}  // namespace

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, run);
}
