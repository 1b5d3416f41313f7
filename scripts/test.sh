#!/usr/bin/env bash
# The test command: installs what the build needs (Debian 12), then three builds, each tested through ctest,
# and a fourth that is only compiled. Warnings are errors in all of them (LAB_WERROR):
#
#   DIR        the normal build: CPU code, and the CUDA sources compiled by nvcc when it is found (for sm_90
#              unless a GPU is present or CMAKE_CUDA_ARCHITECTURES is set); its tests labelled cuda (without
#              a GPU they report SKIPPED) and plain_build (the paths only this build takes); the emulation
#              build runs all of them
#              then the static resources of every kernel (scripts/kernel_resources.py, when nvcc is found)
#   DIR-libcxx clang 16 against libc++ with its transitive includes removed: every source (tests and the .cu
#              files as C++ included) and every header on its own, compiled without code generation, libc++'s
#              headers read as clang modules (scripts/check_includes.py), so a missing standard include fails
#              here before it fails a user on a newer GCC or on clang
#   DIR-asan   the CUDA emulation build under AddressSanitizer + UndefinedBehaviorSanitizer: the same CUDA
#              sources compiled by the host compiler and run on the CPU (common/cuda/emulation/README.md);
#              every test runs, and every test labelled cuda must run: a skipped one fails CI
#   DIR-emu    with --no-sanitize, the emulation build without sanitizers (Release) instead of DIR-asan. One
#              emulation build, not both: the sanitized one runs the same tests and checks more, and a
#              second build of every source would cost CI a quarter of its time
#
# Before them: the format check and the layering check (common/ includes no chapter, a chapter only earlier ones).
# Exits non-zero on any failure.
#
#   scripts/test.sh [--no-sanitize] [--build-dir DIR] [--jobs N]
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=build
SANITIZE=1
JOBS=$(nproc)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-sanitize) SANITIZE=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "scripts/test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# Each phase's header says how long the run has taken so far.
phase() { echo "== $* [$((SECONDS / 60)) min $((SECONDS % 60)) s]"; }

# PyTorch (CPU, Debian's 1.13) for the step bench's PyTorch anchor (tools/compare/pytorch_gpt2_step.py), which a test
# runs at a tiny size; LLVM's linker for the sanitized build.
LAB_EXTRA_PACKAGES=(python3-torch lld)
source scripts/install_deps.sh

# CUDA toolkits install nvcc outside the default PATH.
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

# Many small OpenMP regions run in the tests, often two test processes at once: threads that sleep while
# waiting, rather than spin, keep them from starving each other.
export OMP_WAIT_POLICY=passive

if command -v clang-format >/dev/null 2>&1; then
  phase "format check"
  scripts/format.sh --check
fi

# The dependencies run one way: common/ includes no chapter, a chapter only earlier ones (check_layering.py).
phase "layering check"
python3 scripts/check_layering.py

# The labels of the tests the plain build runs (see its test phase), a CMake list: only their programs are built.
PLAIN_TEST_LABELS="cuda;plain_build"
# The tests' own files (not the code they test) are compiled without optimisation in both tested builds: most of
# their time is spent in the library, so this costs the tests no time, and it saves the compiler much. With
# -fsanitize=address,undefined, GCC 12 compiles tests/common/cuda/test_ops.cpp in 20 s at -O1 and in 12 s at -O0;
# on a 2-core VM the sanitized build's test files took 1249 CPU-seconds at -O1 and 846 at -O0, and its 1133 tests
# no longer (ctest: 918 s at -O1, 867 s at -O0).
TEST_OPTIMIZATION=-O0
phase "configure ($BUILD_DIR)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAB_WERROR=ON \
  -DLAB_BUILD_TESTS_WITH_LABELS="$PLAIN_TEST_LABELS" -DLAB_TEST_COMPILE_OPTIONS="$TEST_OPTIMIZATION"
phase "build"
cmake --build "$BUILD_DIR" -j "$JOBS"
# The emulation build below runs every test; here only those whose path depends on the build: the CUDA tests
# (label cuda: on a GPU they run on it, without one each must skip cleanly), the ones that take another path
# where no GPU can be used or that exist only in this build (label plain_build: the READMEs' commands, the
# PyTorch anchor, a GPU that is not there refused). The other CPU tests would run a second time, unsanitized,
# for a third of the run's test time, and their programs are not built here (LAB_BUILD_TESTS_WITH_LABELS).
phase "test (labels ${PLAIN_TEST_LABELS//;/ and })"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" -L "${PLAIN_TEST_LABELS//;/|}"

# Every kernel's registers, spills and occupancy on sm_90 from ptxas: fails on a kernel that spills without a
# reason in scripts/kernel_resources_allowlist.txt, that has no block size in the script's table, or that should
# run on tensor cores (flash attention's tile kernels, the WMMA matmul) and has no mma in its PTX (nor HMMA in its
# SASS, where cuobjdump is installed).
if command -v nvcc >/dev/null 2>&1; then
  phase "kernel resources (sm_90)"
  python3 scripts/kernel_resources.py --out "$BUILD_DIR/kernel_resources.md" >/dev/null
  echo "kernel resources: $(grep -c '^| `' "$BUILD_DIR/kernel_resources.md") kernels, table in $BUILD_DIR/kernel_resources.md"
fi

# Runs every test of an emulation build, then checks that every test labelled cuda ran (none skipped).
test_emulation_build() {
  local dir=$1 junit
  junit="$(cd "$dir" && pwd)/ctest-junit.xml"
  ctest --test-dir "$dir" --output-on-failure -j "$JOBS" --output-junit "$junit"
  python3 scripts/cuda_tests_ran.py "$dir" "$junit"
}

LIBCXX_DIR="$BUILD_DIR-libcxx"
phase "configure ($LIBCXX_DIR: clang 16, compiled against libc++ only)"
CC=clang-16 CXX=clang++-16 cmake -S . -B "$LIBCXX_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAB_WERROR=ON \
  -DLAB_CUDA_EMULATION=ON -DLAB_WITH_BENCHMARK=OFF >/dev/null
phase "check includes (libc++)"
python3 scripts/check_includes.py "$LIBCXX_DIR" --jobs "$JOBS"

if [[ $SANITIZE == 1 ]]; then
  SAN_DIR="$BUILD_DIR-asan"
  phase "configure ($SAN_DIR: CUDA emulation, -fsanitize=address,undefined)"
  # -g1: line tables, enough for the sanitizers' stack traces, at a fraction of full debug information's
  # compile and link time. The tests' own files at -O0 (see TEST_OPTIMIZATION); the code under test stays at -O2,
  # and both sanitizers check both. Linked by lld: 2.5 times as fast as GNU ld on these programs (bin/test_trainer
  # in 1.2 s instead of 3.0 s), over about 140 of them.
  # Two of UBSan's checks are left out (LAB_SANITIZE_SKIP), the two that cost the most compile time for what they
  # add here: null (a pointer checked before every use; AddressSanitizer already stops at a dereference of null,
  # with its stack) and pointer-overflow (pointer arithmetic that wraps around the address space; the access it
  # leads to is AddressSanitizer's). With GCC 12, common/ops/cuda/layernorm.cu compiled in 21.1 s with every check
  # and in 14.7 s without these two, tests/common/cuda/test_ops.cpp (-O0) in 12.6 s and 10.2 s. The rest of
  # UBSan stays: misaligned loads (a vector load a GPU would fault on), bounds, integer overflow, shifts, casts.
  cmake -S . -B "$SAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DLAB_TEST_COMPILE_OPTIONS="$TEST_OPTIMIZATION" -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
    -DLAB_WERROR=ON -DLAB_CUDA_EMULATION=ON -DLAB_SANITIZE=address,undefined -DLAB_SANITIZE_SKIP=null,pointer-overflow \
    -DLAB_WITH_BENCHMARK=OFF
  phase "build (sanitized)"
  cmake --build "$SAN_DIR" -j "$JOBS"
  phase "test (sanitized)"
  # OpenMP's runtime keeps thread-local blocks alive at exit; they are not leaks of ours.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    test_emulation_build "$SAN_DIR"
else
  EMU_DIR="$BUILD_DIR-emu"
  phase "configure ($EMU_DIR: CUDA emulation, the CUDA sources run on the CPU)"
  cmake -S . -B "$EMU_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAB_WERROR=ON -DLAB_CUDA_EMULATION=ON \
    -DLAB_WITH_BENCHMARK=OFF
  phase "build (emulation)"
  cmake --build "$EMU_DIR" -j "$JOBS"
  phase "test (emulation)"
  test_emulation_build "$EMU_DIR"
fi
phase "all tests passed"
