#!/usr/bin/env bash
# gpu_check.sh: check the CUDA path of this repository on a machine with an NVIDIA GPU, in one command.
#
#   1. finds the GPU (nvidia-smi) and its architecture; fails at once without one;
#   2. finds GoogleTest: the system's, a source tree given with --gtest-src, or one in the usual places
#      ($GTEST_SRC, /usr/src/googletest, /usr/src/gtest, third_party/googletest in the repository and
#      googletest beside it);
#   3. configures a CUDA build for that architecture (-DLAB_WITH_CUDA=ON) and builds it;
#   4. runs the CUDA tests (ctest -L cuda) several at a time, each under a time limit and all of them under the
#      run's deadline, so that a test that hangs is stopped and reported by name and the run goes on; tests
#      that need more GPUs than the machine has skip themselves, saying why;
#   5. runs the GPT-2 124M (d12) training-step benchmark in fp32, TF32 and bf16, and with every speed rung of the
#      book on top of bf16 (fused kernels, 16-bit activations, flash attention, CUDA graphs: "bf16-all");
#   6. writes a report (scripts/gpu_report.py): GPU, driver, toolkit, host compiler, the tests that failed, timed
#      out, did not run or skipped by name, and the benchmark rows; to stdout and to a file.
#
# It needs nvcc, CMake (3.25+), a C++20 compiler and Python 3. Time: the whole run fits in --budget seconds
# (default 540, under a 10-minute limit per command): on an H100 machine with 16 cores the build takes about
# 70 s with 16 jobs and the fp32, TF32 and bf16 benchmarks about 25 s; the tests get what is left, less a reserve
# for the benchmarks and the report, and ctest stops a test still running at that deadline (--stop-time). Every phase
# prints the seconds elapsed. Exit status: 0 when the CUDA tests passed (none failed, timed out or did not
# run, fewer skipped than passed) and every benchmark gave a result; 1 when a test or a benchmark failed, timed
# out or did not run, or most tests skipped; 2 when the machine cannot run the check (no GPU, missing tools,
# no GoogleTest, configuration or build error, a report it cannot write).
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: scripts/gpu_check.sh [options]
  --build-dir DIR   build directory (default: build-gpu in the repository)
  --gtest-src DIR   a GoogleTest source tree to build when the system has no GTest
  --batch B         benchmark batch size (default 8)
  --seq T           benchmark sequence length (default 1024)
  --steps N         benchmark steps (default 20)
  --test-timeout S  seconds a test may run before it is stopped and reported as timed out (default 120),
                    where the test sets no TIMEOUT of its own (the GoogleTest suites set one)
  --test-jobs N     tests run at once (default: the cores, at most 8: they share the GPU)
  --budget S        seconds the whole check may take (default 540): the tests stop in time for the rest
  --skip-build      use the build already in BUILD_DIR
  --skip-bench      no benchmark rows
  --report FILE     where to write the report (default: BUILD_DIR/gpu_report.md)
  -h, --help        this text
USAGE
}

die() {  # die STATUS MESSAGE...
  local status=$1
  shift
  echo "gpu_check: error: $*" >&2
  exit "$status"
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="$repo/build-gpu"
gtest_src=""
batch=8
seq=1024
steps=20
test_timeout=120
test_jobs=""
budget=540
skip_build=0
skip_bench=0
report=""

# ---------------------------------------------------------------- flags
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --skip-build) skip_build=1; shift ;;
    --skip-bench) skip_bench=1; shift ;;
    --build-dir | --gtest-src | --batch | --seq | --steps | --report | --test-timeout | --test-jobs | --budget)
      [ $# -ge 2 ] || die 2 "$1 needs a value"
      case "$1" in
        --build-dir) build_dir=$2 ;;
        --gtest-src) gtest_src=$2 ;;
        --batch) batch=$2 ;;
        --seq) seq=$2 ;;
        --steps) steps=$2 ;;
        --report) report=$2 ;;
        --test-timeout) test_timeout=$2 ;;
        --test-jobs) test_jobs=$2 ;;
        --budget) budget=$2 ;;
      esac
      shift 2 ;;
    *) usage >&2; die 2 "unknown argument '$1'" ;;
  esac
done
for pair in "--batch:$batch" "--seq:$seq" "--steps:$steps" "--test-timeout:$test_timeout" \
  "--test-jobs:${test_jobs:-1}" "--budget:$budget"; do
  [[ ${pair#*:} =~ ^[1-9][0-9]*$ ]] || die 2 "${pair%%:*} must be a positive integer, got '${pair#*:}'"
done
if [ -n "$gtest_src" ]; then
  [ -f "$gtest_src/CMakeLists.txt" ] || die 2 "--gtest-src $gtest_src is not a GoogleTest source tree (no CMakeLists.txt)"
  gtest_src=$(cd "$gtest_src" && pwd)
fi
started=$SECONDS
phase() { echo "gpu_check: == $* [$((SECONDS - started)) s]"; }
# ---------------------------------------------------------------- the GPU and the tools
command -v nvidia-smi >/dev/null 2>&1 || die 2 "nvidia-smi not found: this machine has no NVIDIA driver, and the check needs a GPU"
gpus=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null) ||
  die 2 "nvidia-smi cannot query a GPU (no GPU present, or the driver is not loaded)"
[ -n "$gpus" ] || die 2 "nvidia-smi lists no GPU"
IFS=, read -r gpu_name gpu_driver gpu_cc <<<"$(head -n 1 <<<"$gpus")"
gpu_name=$(echo "$gpu_name" | xargs)
gpu_driver=$(echo "$gpu_driver" | xargs)
gpu_cc=$(echo "$gpu_cc" | xargs)
[[ $gpu_cc =~ ^[0-9]+\.[0-9]+$ ]] || die 2 "unexpected compute capability '$gpu_cc' from nvidia-smi"
arch=${gpu_cc/./}
gpu_count=$(wc -l <<<"$gpus")

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
command -v nvcc >/dev/null 2>&1 || die 2 "nvcc not found (install the CUDA toolkit or put its bin/ on PATH)"
command -v cmake >/dev/null 2>&1 || die 2 "cmake not found"
cuda_version=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
jobs=$(nproc 2>/dev/null || echo 4)
[ -n "$test_jobs" ] || test_jobs=$((jobs < 8 ? jobs : 8))
command -v python3 >/dev/null 2>&1 || die 2 "python3 not found (the report is written by scripts/gpu_report.py)"

# GoogleTest: an installed package CMake finds (its GTestConfig.cmake, or the library and header FindGTest looks
# for), else a source tree, built with the tests (LAB_GTEST_SOURCE_DIR). A build directory configured before
# keeps what it found. --skip-build configures nothing, so needs none.
system_gtest() {
  local prefixes prefix file
  IFS=: read -r -a prefixes <<<"${CMAKE_PREFIX_PATH:-}"
  for prefix in "${prefixes[@]}" /usr/local /usr; do
    [ -n "$prefix" ] || continue
    for file in "$prefix"/lib*/cmake/GTest/GTestConfig.cmake "$prefix"/lib/*/cmake/GTest/GTestConfig.cmake \
      "$prefix"/share/cmake/GTest/GTestConfig.cmake; do
      [ -f "$file" ] && return 0
    done
    [ -f "$prefix/include/gtest/gtest.h" ] || continue
    for file in "$prefix"/lib*/libgtest.* "$prefix"/lib/*/libgtest.*; do
      [ -f "$file" ] && return 0
    done
  done
  return 1
}
cached() {  # cached NAME: a variable of an earlier configuration of the build directory, or nothing
  if [ -f "$build_dir/CMakeCache.txt" ]; then sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt" | head -n 1; fi
}
if [ "$skip_build" -eq 0 ] && [ -z "$gtest_src" ] && ! system_gtest; then
  cached_gtest_dir=$(cached GTest_DIR)
  if [ -z "$cached_gtest_dir" ] || [ ! -f "$cached_gtest_dir/GTestConfig.cmake" ]; then
    for candidate in "$(cached LAB_GTEST_SOURCE_DIR)" "${GTEST_SRC:-}" /usr/src/googletest /usr/src/gtest \
      "$repo/third_party/googletest" "$repo/../googletest"; do
      if [ -n "$candidate" ] && [ -f "$candidate/CMakeLists.txt" ]; then
        gtest_src=$(cd "$candidate" && pwd)
        break
      fi
    done
    [ -n "$gtest_src" ] || die 2 "no GoogleTest: pass --gtest-src DIR with a GoogleTest source tree (or set" \
      "GTEST_SRC), or install the distribution's package (Debian/Ubuntu: googletest or libgtest-dev)"
    echo "gpu_check: GoogleTest from the source tree $gtest_src"
  fi
fi

mkdir -p "$build_dir" || die 2 "cannot create the build directory $build_dir"
build_dir=$(cd "$build_dir" && pwd)
report=${report:-$build_dir/gpu_report.md}
mkdir -p "$(dirname "$report")" || die 2 "cannot create the directory of the report $report"
echo "gpu_check: $gpu_count x $gpu_name (sm_$arch), driver $gpu_driver, CUDA $cuda_version; build in $build_dir"

# ---------------------------------------------------------------- configure and build
if [ "$skip_build" -eq 0 ]; then
  phase "configure"
  # A build directory keeps the generator it was configured with.
  generator=$(cached CMAKE_GENERATOR)
  if [ -z "$generator" ]; then
    generator="Unix Makefiles"
    command -v ninja >/dev/null 2>&1 && generator=Ninja
  fi
  cmake_args=(-S "$repo" -B "$build_dir" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DLAB_WITH_CUDA=ON
    "-DCMAKE_CUDA_ARCHITECTURES=$arch" -DLAB_WITH_TESTS=ON "-DLAB_TEST_TIMEOUT=$test_timeout")
  [ -n "$gtest_src" ] && cmake_args+=("-DLAB_GTEST_SOURCE_DIR=$gtest_src")
  cmake "${cmake_args[@]}" || die 2 "CMake configuration failed"
  phase "build ($jobs jobs)"
  build_started=$SECONDS
  cmake --build "$build_dir" --parallel "$jobs" || die 2 "the build failed"
  build_seconds=$((SECONDS - build_started))
else
  [ -f "$build_dir/CMakeCache.txt" ] || die 2 "--skip-build: $build_dir holds no build"
  build_seconds=""
fi

# ---------------------------------------------------------------- CUDA tests
# The tests have until the deadline, less a reserve for the benchmarks and the report; ctest stops a test still
# running then (a test's own TIMEOUT takes precedence over --timeout, and the GoogleTest suites set one).
reserve=$((skip_bench ? 10 : 75))
test_seconds=$((started + budget - reserve - SECONDS))
[ "$test_seconds" -ge 60 ] || test_seconds=60
stop_time=$(date -d "+$test_seconds seconds" +%H:%M:%S)
phase "CUDA tests (ctest -L cuda, $test_jobs at a time, --timeout $test_timeout, all stopped at $stop_time)"
ctest_log="$build_dir/gpu_check_ctest.log"
junit="$build_dir/gpu_check_ctest.xml"
test_list="$build_dir/gpu_check_tests.json"
rm -f "$junit" "$test_list"
# The tests that should run, so that those ctest never started before the deadline are reported too.
ctest --test-dir "$build_dir" -L cuda --show-only=json-v1 >"$test_list" 2>/dev/null || rm -f "$test_list"
set +e
ctest --test-dir "$build_dir" -L cuda --timeout "$test_timeout" --stop-time "$stop_time" -j "$test_jobs" \
  --output-on-failure --output-junit "$junit" 2>&1 | tee "$ctest_log"
set -e

# ---------------------------------------------------------------- GPT-2 step benchmark
bench="$build_dir/bin/gpt2_step_bench"
bench_args=()
if [ "$skip_bench" -eq 0 ]; then
  # label: the flags of the run
  for run in "fp32:--dtype fp32" "tf32:--dtype tf32" "bf16:--dtype bf16" \
    "bf16-all:--dtype bf16 --kernels fused --activations 16bit --attention flash --cuda-graphs"; do
    label=${run%%:*}
    read -r -a flags <<<"${run#*:}"
    json="$build_dir/gpt2_step_$label.json"
    rm -f "$json"
    bench_args+=(--bench "$label=$json")
    # A benchmark that hangs must not take the budget with it; a run that fails leaves no result to report.
    limit=$((started + budget - 10 - SECONDS))
    limit=$((limit < 30 ? 30 : limit > 180 ? 180 : limit))
    phase "benchmark: gpt2_step_bench --model d12 --device cuda ${flags[*]} --batch $batch --seq $seq --steps $steps"
    if [ ! -x "$bench" ] || ! timeout -k 10 "$limit" "$bench" --model d12 --device cuda "${flags[@]}" \
      --batch "$batch" --seq "$seq" --steps "$steps" --json "$json"; then
      echo "gpu_check: the $label benchmark failed (or ran past $limit s)" >&2
      rm -f "$json"
    fi
  done
fi

# ---------------------------------------------------------------- report
phase "report"
set +e
python3 "$repo/scripts/gpu_report.py" --junit "$junit" --ctest-log "$ctest_log" --test-list "$test_list" \
  --cache "$build_dir/CMakeCache.txt" \
  --fact "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --fact "commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --fact "GPU=$gpu_count x $gpu_name (compute capability $gpu_cc, built for sm_$arch)" \
  --fact "driver=$gpu_driver; CUDA toolkit $cuda_version" \
  --fact "CMake=$(cmake --version | head -n 1)" \
  --fact "build time=${build_seconds:+$build_seconds s with $jobs jobs}${build_seconds:-reused (--skip-build)}" \
  --fact "whole check=$((SECONDS - started)) s (budget $budget s)" \
  --fact "logs=\`$ctest_log\`, \`$junit\`" \
  --bench-title "GPT-2 124M (d12) training step, batch $batch x seq $seq, $steps steps:" \
  "${bench_args[@]}" --out "$report"
status=$?
set -e
case $status in
  0) echo "gpu_check: OK; report written to $report [$((SECONDS - started)) s]" ;;
  1) echo "gpu_check: FAILED ($(sed -n 's/^Result: FAILED: //p' "$report")); report written to $report" >&2 ;;
  *) die 2 "the report could not be written" ;;
esac
exit "$status"
