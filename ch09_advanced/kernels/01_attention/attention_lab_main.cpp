// ch09_attention_lab: causal attention's versions side by side (see attention_lab.h), forward or backward, each
// validated against the fp64 reference and then timed.
//
//   ch09_attention_lab                                 forward, B = 8, T = 1024, 12 heads of 64 (GPT-2 d12)
//   ch09_attention_lab --pass backward --repeats 10
//   ch09_attention_lab --seq 4096 --batch 2 --version 2,4
#include <cstdio>
#include <string>

#include "ch09_advanced/kernels/01_attention/attention_lab.h"
#include "common/core/device.h"
#include "common/core/error.h"
#include "common/lab/lab_main.h"
#include "common/util/flags.h"
#include "common/util/main.h"

namespace {

int run(int argc, char** argv) {
  lab::ch09::AttentionProblem problem;
  lab::ch09::AttentionShape& s = problem.shape;
  std::string pass = "forward", dtype = "bf16";
  int64_t seed = static_cast<int64_t>(problem.seed);
  lab::Flags flags("ch09_attention_lab", "Causal attention: materialised and flash versions side by side");
  flags.add_choice("pass", &pass, {"forward", "backward"}, "which pass to run");
  flags.add_int("batch", &s.B, "batch rows B", 1, 1024);
  flags.add_int("seq", &s.T, "sequence length T", 1, int64_t{1} << 16);
  flags.add_int("heads", &s.NH, "attention heads NH", 1, 256);
  flags.add_int("head-size", &s.HS, "head size HS (the CUDA flash kernels take up to 128)", 1, 1024);
  flags.add_choice("dtype", &dtype, {"bf16", "fp16"}, "inputs of the CUDA flash version");
  flags.add_int("seed", &seed, "seed of the random inputs", 0);
  lab::kernel_lab::LabCommandLine lab_flags;
  lab_flags.register_flags(flags);
  if (!lab_flags.parse(flags, argc, argv)) return 0;
  lab_flags.quick_size(flags, "batch", s.B, int64_t{1});
  lab_flags.quick_size(flags, "seq", s.T, int64_t{256});
  lab_flags.quick_size(flags, "heads", s.NH, int64_t{4});
  // The materialised versions hold B*NH*T^2 f32 probabilities.
  LAB_CHECK(s.B * s.NH * s.T * s.T <= (int64_t{1} << 31), InvalidArgument,
            "--batch x --heads x --seq^2 = ", s.B * s.NH * s.T * s.T,
            " probabilities (8 GiB in f32) is more than this lab holds (2^31)");
  problem.flash_dtype = dtype == "bf16" ? lab::DType::BF16 : lab::DType::F16;
  problem.seed = static_cast<uint64_t>(seed);
  if (!lab::cuda_available()) std::printf("no CUDA device visible: only the CPU versions run\n");
  const lab::kernel_lab::KernelLab lab = lab::ch09::make_attention_lab(
      problem, pass == "forward" ? lab::ch09::LabPass::Forward : lab::ch09::LabPass::Backward);
  return lab::kernel_lab::run_lab(lab, lab_flags);
}

}  // namespace

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, run);
}
