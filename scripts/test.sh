#!/usr/bin/env bash
# The test command: installs what the build needs (Debian 12), configures, builds and runs every test
# through ctest, then builds the CPU code again with AddressSanitizer + UndefinedBehaviorSanitizer and
# runs the CPU test suite under them. Exits non-zero on any failure.
#
#   scripts/test.sh [--no-sanitize] [--build-dir DIR] [--jobs N]
#
# CUDA: when nvcc is found the CUDA sources are compiled and linked (for sm_90 unless a GPU is present or
# CMAKE_CUDA_ARCHITECTURES is set), and the CUDA tests report SKIPPED on a machine without a GPU.
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
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "scripts/test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

source scripts/install_deps.sh

# CUDA toolkits install nvcc outside the default PATH.
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

# Many small OpenMP regions run in the tests, often two test processes at once: threads that sleep while
# waiting, rather than spin, keep them from starving each other.
export OMP_WAIT_POLICY=passive

if command -v clang-format >/dev/null 2>&1; then
  echo "== format check"
  scripts/format.sh --check
fi

echo "== configure ($BUILD_DIR)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
echo "== build"
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "== test"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"

if [[ $SANITIZE == 1 ]]; then
  SAN_DIR="$BUILD_DIR-asan"
  echo "== configure ($SAN_DIR: CPU only, -fsanitize=address,undefined)"
  cmake -S . -B "$SAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLAB_WITH_CUDA=OFF \
    -DLAB_SANITIZE=address,undefined -DLAB_WITH_BENCHMARK=OFF
  echo "== build (sanitized)"
  cmake --build "$SAN_DIR" -j "$JOBS"
  echo "== test (sanitized)"
  # OpenMP's runtime keeps thread-local blocks alive at exit; they are not leaks of ours.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$SAN_DIR" --output-on-failure -j "$JOBS" -LE cuda
fi
echo "== all tests passed"
