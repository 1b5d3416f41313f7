// ch06_bias_gelu_lab: bias + GELU, the versions side by side (see bias_gelu_lab.h), each validated against
// the CPU reference and then timed.
//
//   ch06_bias_gelu_lab                          forward, N = 8192 rows, OC = 3072 (GPT-2 d12's MLP, B*T = 8192)
//   ch06_bias_gelu_lab --pass backward
//   ch06_bias_gelu_lab --pass linear            the GEMM included: GEMM + kernels against the GEMM's epilogue
#include <cstdio>
#include <string>

#include "ch06_single_gpu/kernels/03_bias_gelu/bias_gelu_lab.h"
#include "common/core/device.h"
#include "common/core/error.h"
#include "common/lab/lab_main.h"
#include "common/util/flags.h"
#include "common/util/main.h"

namespace {

int run(int argc, char** argv) {
  lab::ch06::BiasGeluProblem problem;
  std::string pass = "forward";
  double spread = problem.spread;
  int64_t seed = static_cast<int64_t>(problem.seed);
  lab::Flags flags("ch06_bias_gelu_lab", "Bias + GELU: the versions side by side, validated then timed");
  flags.add_choice("pass", &pass, {"forward", "backward", "linear"},
                   "forward, backward, or linear (the forward with the GEMM before it, GPU versions only)");
  flags.add_int("rows", &problem.rows, "rows N = B*T", 1, int64_t{1} << 22);
  flags.add_int("columns", &problem.columns, "columns OC (GPT-2: 4C = 3072 at d12)", 1, int64_t{1} << 16);
  flags.add_int("inputs", &problem.inputs, "the GEMM's depth C (--pass linear)", 1, int64_t{1} << 16);
  flags.add_float("spread", &spread, "standard deviation of GELU's input", 1e-3, 1e3);
  flags.add_int("seed", &seed, "seed of the random inputs", 0);
  lab::kernel_lab::LabCommandLine lab_flags;
  lab_flags.register_flags(flags);
  if (!lab_flags.parse(flags, argc, argv)) return 0;
  lab_flags.quick_size(flags, "rows", problem.rows, int64_t{512});
  LAB_CHECK(problem.rows * problem.columns <= (int64_t{1} << 27) && problem.rows * problem.inputs <= (int64_t{1} << 27),
            InvalidArgument, "--rows x --columns (and --rows x --inputs) must be at most 2^27 elements in this lab");
  problem.spread = static_cast<float>(spread);
  problem.seed = static_cast<uint64_t>(seed);
  const bool linear = pass == "linear";
  LAB_CHECK(!linear || lab::cuda_available(), Unsupported,
            "--pass linear has GPU versions only, and no CUDA device is visible");
  if (!lab::cuda_available()) std::printf("no CUDA device visible: only the CPU versions run\n");
  const lab::ch06::BiasGeluPass which = linear              ? lab::ch06::BiasGeluPass::LinearForward
                                        : pass == "forward" ? lab::ch06::BiasGeluPass::Forward
                                                            : lab::ch06::BiasGeluPass::Backward;
  return lab::kernel_lab::run_lab(lab::ch06::make_bias_gelu_lab(problem, which), lab_flags);
}

}  // namespace

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, run);
}
