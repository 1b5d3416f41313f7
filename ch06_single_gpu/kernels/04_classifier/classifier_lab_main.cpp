// ch06_classifier_lab: softmax + cross-entropy + backward, the versions side by side (see classifier_lab.h),
// each validated against the CPU reference and then timed.
//
//   ch06_classifier_lab                                N = 1024 rows of GPT-2's vocabulary (50257, padded 50304)
//   ch06_classifier_lab --rows 8192 --repeats 50       B*T = 8 x 1024, as the trainer's d12 step
//   ch06_classifier_lab --rows 8192 --dtype bf16       the same in bf16, the logits of its 16-bit step
//   ch06_classifier_lab --offset 1000 --validate-only  logits around 1000: exp() overflows without the maximum
#include <cstdio>
#include <string>

#include "ch06_single_gpu/kernels/04_classifier/classifier_lab.h"
#include "common/core/device.h"
#include "common/core/error.h"
#include "common/lab/lab_main.h"
#include "common/util/flags.h"
#include "common/util/main.h"

namespace {

int run(int argc, char** argv) {
  lab::ch06::ClassifierProblem problem;
  double offset = problem.offset, spread = problem.spread;
  int64_t seed = static_cast<int64_t>(problem.seed);
  lab::Flags flags("ch06_classifier_lab",
                   "Softmax + cross-entropy + backward: the versions side by side, validated then timed");
  flags.add_int("rows", &problem.rows, "rows N = B*T", 1, int64_t{1} << 20);
  flags.add_int("vocab", &problem.vocab, "real vocabulary V", 1, int64_t{1} << 24);
  flags.add_int("padded-vocab", &problem.padded_vocab, "columns Vp of the logits (>= V)", 1, int64_t{1} << 24);
  flags.add_float("offset", &offset, "mean of the logits (1000 punishes a softmax without the maximum)", -1e4, 1e4);
  flags.add_float("spread", &spread, "standard deviation of the logits", 1e-3, 100);
  flags.add_int("seed", &seed, "seed of the random logits and targets", 0);
  std::string dtype = "f32";
  flags.add_choice("dtype", &dtype, {"f32", "bf16", "f16"},
                   "dtype of the logits (bf16, f16: the model's under 16-bit activations; only v3, v5, v6 and the CPU "
                   "reference read them)");
  lab::kernel_lab::LabCommandLine lab_flags;
  lab_flags.register_flags(flags);
  if (!lab_flags.parse(flags, argc, argv)) return 0;
  lab_flags.quick_size(flags, "rows", problem.rows, int64_t{64});
  LAB_CHECK(problem.vocab <= problem.padded_vocab, InvalidArgument, "--vocab ", problem.vocab,
            " is larger than --padded-vocab ", problem.padded_vocab);
  LAB_CHECK(problem.rows * problem.padded_vocab <= (int64_t{1} << 30), InvalidArgument,
            "--rows x --padded-vocab = ", problem.rows * problem.padded_vocab,
            " logits is more than this lab holds (2^30)");
  problem.offset = static_cast<float>(offset);
  problem.spread = static_cast<float>(spread);
  problem.seed = static_cast<uint64_t>(seed);
  problem.dtype = lab::parse_dtype(dtype);
  if (!lab::cuda_available()) std::printf("no CUDA device visible: only the CPU versions run\n");
  const lab::kernel_lab::KernelLab lab = lab::ch06::make_classifier_lab(problem);
  return lab::kernel_lab::run_lab(lab, lab_flags);
}

}  // namespace

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, run);
}
