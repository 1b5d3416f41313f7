// ch06_matmul_lab: the matmul versions side by side (matmul_lab.h), validated, then timed.
//
//   ch06_matmul_lab                                   GPT-2's c_fc (M=4096, N=3072, K=768), every version but
//                                                     the CPU's naive loop, left out above 1 GFLOP a run
//   ch06_matmul_lab --cpu-naive                       the naive loop too (15 s to a minute a run on 2 cores)
//   ch06_matmul_lab --m 512 --n 768 --k 768           every CPU version, the naive loop included, in seconds
//   ch06_matmul_lab --m 1024 --n 1024 --k 1024 --version 15,16 --repeats 5
//   ch06_matmul_lab --m 257 --n 193 --k 130 --validate-only      (the CUDA emulation build: validation only)
#include <cstdint>

#include "ch06_single_gpu/kernels/01_matmul/matmul_lab.h"
#include "common/lab/lab_main.h"
#include "common/util/flags.h"
#include "common/util/main.h"

namespace {

int run(int argc, char** argv) {
  lab::ch06::MatmulProblem problem;
  double offset = 0.0;
  int64_t seed = static_cast<int64_t>(problem.seed);
  lab::Flags flags("ch06_matmul_lab",
                   "C = A @ B (+ bias, GELU): naive -> tiled -> register blocked -> vectorised -> tensor cores -> "
                   "cuBLAS -> cuBLASLt epilogues, and the CPU's versions, each validated then timed");
  flags.add_int("m", &problem.M, "rows of A and C (B*T)", 1, int64_t{1} << 20);
  flags.add_int("n", &problem.N, "columns of B and C (out features)", 1, int64_t{1} << 20);
  flags.add_int("k", &problem.K, "columns of A, rows of B (in features)", 1, int64_t{1} << 20);
  flags.add_float("offset", &offset, "A = offset + N(0, 1): large offsets make every partial sum large", -1e4, 1e4);
  flags.add_int("seed", &seed, "seed of the random inputs", 0);
  flags.add_bool("cpu-naive", &problem.cpu_naive_at_any_size,
                 "run the CPU's naive loop at any size: it is left out above 1 GFLOP a run (19.3 GFLOP at the default "
                 "shape: 15 s to a minute a run on 2 cores), or give a smaller shape (--m 512 --n 768 --k 768)");
  lab::kernel_lab::LabCommandLine lab_flags;
  lab_flags.register_flags(flags);
  if (!lab_flags.parse(flags, argc, argv)) return 0;
  lab_flags.quick_size(flags, "m", problem.M, int64_t{64});
  problem.offset = static_cast<float>(offset);
  problem.seed = static_cast<uint64_t>(seed);
  return lab::kernel_lab::run_lab(lab::ch06::make_matmul_lab(problem), lab_flags);
}

}  // namespace

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, run);
}
