#!/usr/bin/env bash
# gpu_check.sh: check the CUDA path of this repository on a machine with an NVIDIA GPU, in one command.
#
#   1. finds the GPU (nvidia-smi) and its architecture; fails at once without one;
#   2. configures a CUDA build for that architecture (-DLAB_WITH_CUDA=ON) and builds it;
#   3. runs the CUDA tests (ctest -L cuda): every CUDA op against the CPU reference, and the runtime;
#   4. runs the GPT-2 124M (d12) training-step benchmark in fp32 and in TF32;
#   5. writes a short report (GPU, driver, test counts, tokens/s and MFU) to stdout and to a file.
#
# It needs nvcc, CMake (3.25+) and a C++20 compiler; GoogleTest comes from the system or from a source
# tree given with --gtest-src. Exit status: 0 when the CUDA tests passed (none failed, fewer skipped than
# passed) and both benchmarks ran, 1 when a test or a benchmark failed or most tests skipped, 2 when the
# machine cannot run the check (no GPU, missing tools, configuration or build error).
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: scripts/gpu_check.sh [options]
  --build-dir DIR   build directory (default: build-gpu in the repository)
  --gtest-src DIR   a GoogleTest source tree to build when the system has no GTest
  --batch B         benchmark batch size (default 8)
  --seq T           benchmark sequence length (default 1024)
  --steps N         benchmark steps (default 20)
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
report=""

# ---------------------------------------------------------------- flags
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --build-dir | --gtest-src | --batch | --seq | --steps | --report)
      [ $# -ge 2 ] || die 2 "$1 needs a value"
      case "$1" in
        --build-dir) build_dir=$2 ;;
        --gtest-src) gtest_src=$2 ;;
        --batch) batch=$2 ;;
        --seq) seq=$2 ;;
        --steps) steps=$2 ;;
        --report) report=$2 ;;
      esac
      shift 2 ;;
    *) usage >&2; die 2 "unknown argument '$1'" ;;
  esac
done
for pair in "--batch:$batch" "--seq:$seq" "--steps:$steps"; do
  [[ ${pair#*:} =~ ^[1-9][0-9]*$ ]] || die 2 "${pair%%:*} must be a positive integer, got '${pair#*:}'"
done
if [ -n "$gtest_src" ]; then
  [ -f "$gtest_src/CMakeLists.txt" ] || die 2 "--gtest-src $gtest_src is not a GoogleTest source tree (no CMakeLists.txt)"
  gtest_src=$(cd "$gtest_src" && pwd)
fi
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
generator="Unix Makefiles"
command -v ninja >/dev/null 2>&1 && generator=Ninja
jobs=$(nproc 2>/dev/null || echo 4)

mkdir -p "$build_dir"
build_dir=$(cd "$build_dir" && pwd)
report=${report:-$build_dir/gpu_report.md}
mkdir -p "$(dirname "$report")"
echo "gpu_check: $gpu_count x $gpu_name (sm_$arch), driver $gpu_driver, CUDA $cuda_version; build in $build_dir"

# ---------------------------------------------------------------- configure and build
cmake_args=(-S "$repo" -B "$build_dir" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DLAB_WITH_CUDA=ON
  "-DCMAKE_CUDA_ARCHITECTURES=$arch" -DLAB_WITH_TESTS=ON)
[ -n "$gtest_src" ] && cmake_args+=("-DLAB_GTEST_SOURCE_DIR=$gtest_src")
cmake "${cmake_args[@]}" ||
  die 2 "CMake configuration failed (without a system GoogleTest, pass --gtest-src DIR with a GoogleTest source tree)"
cmake --build "$build_dir" --parallel "$jobs" || die 2 "the build failed"

# ---------------------------------------------------------------- CUDA tests
ctest_log="$build_dir/gpu_check_ctest.log"
set +e
ctest --test-dir "$build_dir" -L cuda --output-on-failure 2>&1 | tee "$ctest_log"
set -e
tests_total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$ctest_log" | tail -n 1)
tests_failed=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$ctest_log" | tail -n 1)
tests_skipped=$(grep -c '(Skipped)$' "$ctest_log" || true)
if [ -z "$tests_total" ]; then
  tests_total=0 tests_failed=0 tests_skipped=0
  echo "gpu_check: ctest found no CUDA tests" >&2
fi
tests_passed=$((tests_total - tests_failed - tests_skipped))

# ---------------------------------------------------------------- GPT-2 step benchmark
# json_field FILE KEY: the value of a top-level key of a flat JSON object (numbers, null, strings unquoted).
json_field() {
  sed -n "s/.*\"$2\"[[:space:]]*:[[:space:]]*\([^,}]*\).*/\1/p" "$1" | head -n 1 | sed 's/^"//; s/"[[:space:]]*$//'
}
bench="$build_dir/bin/gpt2_step_bench"
bench_ok=1
bench_rows=""
for dtype in fp32 tf32; do
  json="$build_dir/gpt2_step_$dtype.json"
  rm -f "$json"
  if [ ! -x "$bench" ]; then
    echo "gpu_check: $bench was not built" >&2
    bench_ok=0
    bench_rows+="| $dtype | benchmark binary missing | | | | |"$'\n'
    continue
  fi
  echo "gpu_check: $bench --model d12 --device cuda --dtype $dtype --batch $batch --seq $seq --steps $steps"
  if ! "$bench" --model d12 --device cuda --dtype "$dtype" --batch "$batch" --seq "$seq" --steps "$steps" \
    --json "$json" || [ ! -s "$json" ]; then
    echo "gpu_check: the $dtype benchmark failed" >&2
    bench_ok=0
    bench_rows+="| $dtype | failed | | | | |"$'\n'
    continue
  fi
  ms=$(json_field "$json" ms_median)
  tokens=$(json_field "$json" tokens_per_s)
  mfu=$(json_field "$json" mfu)
  peak=$(json_field "$json" peak_name)
  mem=$(json_field "$json" mem_peak_bytes)
  tokens_text=$(awk -v x="$tokens" 'BEGIN { printf "%.0f", x }')
  ms_text=$(awk -v x="$ms" 'BEGIN { printf "%.1f", x }')
  mem_text=$(awk -v x="$mem" 'BEGIN { printf "%.2f GiB", x / 1073741824 }')
  if [ -z "$mfu" ] || [ "$mfu" = null ]; then
    mfu_text="unknown GPU: peak not known"
  else
    mfu_text=$(awk -v x="$mfu" -v p="$peak" 'BEGIN { printf "%.1f%% of %s", 100 * x, p }')
  fi
  bench_rows+="| $dtype | $ms_text | $tokens_text | $mfu_text | $mem_text | \`$json\` |"$'\n'
done

# ---------------------------------------------------------------- report
{
  echo "# GPU check"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- commit: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- GPU: $gpu_count x $gpu_name (compute capability $gpu_cc, built for sm_$arch)"
  echo "- driver: $gpu_driver; CUDA toolkit $cuda_version"
  echo "- CUDA tests (ctest -L cuda): $tests_passed passed, $tests_failed failed, $tests_skipped skipped, of $tests_total (log: \`$ctest_log\`)"
  echo
  echo "GPT-2 124M (d12) training step, batch $batch x seq $seq, $steps steps:"
  echo
  echo "| dtype | ms/step (median) | tokens/s | MFU | peak memory | result |"
  echo "| --- | --- | --- | --- | --- | --- |"
  printf '%s' "$bench_rows"
} >"$report"
echo
cat "$report"
echo
echo "gpu_check: report written to $report"

# A few tests skip for good reasons (a second GPU, an older architecture); most of them skipping means the
# CUDA runtime does not see the GPU that nvidia-smi lists.
if [ "$tests_skipped" -gt "$tests_passed" ]; then
  echo "gpu_check: $tests_skipped of $tests_total CUDA tests skipped: the CUDA runtime does not see the GPU" >&2
fi
if [ "$tests_failed" -ne 0 ] || [ "$tests_passed" -le 0 ] || [ "$tests_skipped" -gt "$tests_passed" ] ||
  [ "$bench_ok" -ne 1 ]; then
  echo "gpu_check: FAILED (CUDA tests: $tests_passed passed, $tests_failed failed, $tests_skipped skipped;" \
    "benchmarks ok: $bench_ok)" >&2
  exit 1
fi
echo "gpu_check: OK"
