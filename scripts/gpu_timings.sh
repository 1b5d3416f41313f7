#!/usr/bin/env bash
# gpu_timings.sh: on a machine with an NVIDIA GPU, the timings that the READMEs' GPU columns hold, in one run under
# one time budget (default 540 s: it fits a 10-minute command with the build):
#   1. builds gpt2_step_bench, ch09_attention_lab and ch06_classifier_lab for this GPU (as gpu_bench.sh does);
#   2. scripts/gpu_bench.sh at B = 8 and 32 (--batches): our step with bf16 alone, with every rung, with the one-pass
#      flash backward, with flash attention's kernel sets timed (--attention flash-tuned), with selective recompute,
#      with the LayerNorms recomputed too, and PyTorch eager and torch.compile beside it;
#   3. the per-kernel profile of the all-rungs step at the largest of those batches (gpt2_step_bench --profile, without
#      CUDA graphs, which a profile refuses), with the two-pass flash backward and with the one-pass one;
#   4. chapter 9's attention lab, backward: v7 (the two passes) beside v9 (one pass, dQ by atomics), GPT-2's 12 heads
#      of 64 and 6 heads of 128, and at 12 heads of 64 v12 and v13 (two strips of rows a warp, 128-row tiles; the
#      dK/dV kernel in steps of 32 or 16 queries); forward: v7 (a strip of 16 queries a warp) beside v11 (two strips,
#      128-query tiles), v14 (v7 on Hopper's wgmma) and v15 (v14 with the softmax overlapped), 12 heads of 64, and
#      v7 beside v14 and v15 at 6 heads of 128;
#   5. chapter 6's classifier lab in bf16 at 8192 rows (B = 8, T = 1024): v5 beside v6.
# The steps run in that order, each under a time limit; a step that would not fit what is left of the budget is
# skipped and named. Everything lands in OUT_DIR: one log per step, the benches' JSONs, and summary.md (the machine,
# the commit, each step's status and its tables). To take it off the machine as one file:
#   tar czf timings.tgz -C "$(dirname OUT_DIR)" "$(basename OUT_DIR)"
#
#   scripts/gpu_timings.sh                              # build-gpu, B = 8 and 32, 540 s
#   scripts/gpu_timings.sh --skip-build --build-dir build --batches "8 16 32" --budget 900
#   scripts/gpu_timings.sh --skip-build --build-dir build-emu --quick   # tiny sizes: a check of the script itself
#
# Exit status: 0 when every step gave its result; 1 when one failed, timed out or was skipped; 2 for a bad flag, no
# GPU or a failed build.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: scripts/gpu_timings.sh [options]
  --build-dir DIR  the CUDA build (default: build-gpu in the repository)
  --skip-build     use BUILD_DIR as it is
  --batches "B.."  the step's batch sizes (default "8 32"); the profile runs at the last
  --python PY      the Python with PyTorch (default: python3)
  --budget S       seconds the whole run may take, the build included (default 540)
  --out DIR        where the logs, JSONs and summary.md go (default: BUILD_DIR/timings)
  --quick          tiny sizes (the tiny model at B = 2, T = 64; the labs' --quick): to check the script, not to publish
  -h, --help       this text
USAGE
}

die() {  # die STATUS MESSAGE...
  local status=$1
  shift
  echo "gpu_timings: error: $*" >&2
  exit "$status"
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="$repo/build-gpu"
skip_build=0
quick=0
batches="8 32"
python=python3
budget=540
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --skip-build) skip_build=1; shift ;;
    --quick) quick=1; shift ;;
    --build-dir | --batches | --python | --budget | --out)
      [ $# -ge 2 ] || die 2 "$1 needs a value"
      case "$1" in
        --build-dir) build_dir=$2 ;;
        --batches) batches=$2 ;;
        --python) python=$2 ;;
        --budget) budget=$2 ;;
        --out) out=$2 ;;
      esac
      shift 2 ;;
    *) usage >&2; die 2 "unknown argument '$1'" ;;
  esac
done
for value in $batches "$budget"; do
  [[ $value =~ ^[1-9][0-9]*$ ]] || die 2 "--batches and --budget take positive integers, got '$value'"
done
[ -n "$batches" ] || die 2 "--batches is empty"
command -v nvidia-smi >/dev/null 2>&1 || die 2 "nvidia-smi not found: this script needs an NVIDIA GPU"
gpu=$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -n 1) ||
  die 2 "nvidia-smi cannot query a GPU"
[ -n "$gpu" ] || die 2 "nvidia-smi lists no GPU"
out=${out:-$build_dir/timings}
mkdir -p "$out" || die 2 "cannot create $out"
summary="$out/summary.md"
started=$SECONDS
left() { echo $((budget - (SECONDS - started))); }
status=0
{
  echo "# GPU timings"
  echo
  echo "$gpu; $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
} >"$summary"

# step NAME NEEDED_SECONDS COMMAND...: runs COMMAND under what is left of the budget (at most its own share), its
# output in OUT/NAME.log and on stdout; skipped when less than NEEDED_SECONDS are left.
step() {
  local name=$1 needed=$2
  shift 2
  local remaining
  remaining=$(left)
  echo "gpu_timings: == $name [$((SECONDS - started)) s of $budget]"
  if [ "$remaining" -lt "$needed" ]; then
    echo "- $name: skipped, $remaining s left of the budget (it needs about $needed)" >>"$summary"
    status=1
    return 0
  fi
  local rc=0
  timeout -k 10 "$remaining" "$@" >"$out/$name.log" 2>&1 || rc=$?
  tail -n 40 "$out/$name.log"
  if [ "$rc" -eq 0 ]; then
    echo "- $name: done in $((SECONDS - started)) s" >>"$summary"
  else
    echo "- $name: FAILED (status $rc; 124 is the budget) — see $name.log" >>"$summary"
    status=1
  fi
}

# ---------------------------------------------------------------- 1. build
if [ "$skip_build" -eq 0 ]; then
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
  arch=$(cut -d, -f2 <<<"$gpu" | xargs)
  arch=${arch/./}
  generator="Unix Makefiles"
  command -v ninja >/dev/null 2>&1 && generator=Ninja
  [ -f "$build_dir/CMakeCache.txt" ] && generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build_dir/CMakeCache.txt")
  echo "gpu_timings: == build for sm_$arch in $build_dir"
  { cmake -S "$repo" -B "$build_dir" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DLAB_WITH_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=$arch" -DLAB_WITH_BENCHMARK=OFF &&
    cmake --build "$build_dir" --parallel "$(nproc)" --target gpt2_step_bench ch09_attention_lab ch06_classifier_lab; } \
    >"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; die 2 "the build failed (see $out/build.log)"; }
  echo "- build: done in $((SECONDS - started)) s" >>"$summary"
fi
bin="$build_dir/bin"
for program in gpt2_step_bench ch09_attention_lab ch06_classifier_lab; do
  [ -x "$bin/$program" ] || die 2 "$bin/$program not found (build it, or drop --skip-build)"
done

# ---------------------------------------------------------------- 2-5. the timings
last_batch=${batches##* }
model=d12 seq=1024 lab_size=()
[ "$quick" -eq 1 ] && model=tiny seq=64 batches=2 last_batch=2 lab_size=(--quick)
rungs=(--model "$model" --device cuda --seq "$seq" --dtype bf16 --kernels fused --activations 16bit)
step step_bench 200 bash "$repo/scripts/gpu_bench.sh" --skip-build --build-dir "$build_dir" --batches "$batches" \
  --model "$model" --seq "$seq" --steps 10 --timeout 150 --python "$python" --out "$out/step_bench.md"
step profile_two_passes 40 "$bin/gpt2_step_bench" "${rungs[@]}" --attention flash --batch "$last_batch" --steps 3 \
  --profile --json "$out/profile_two_passes.json"
step profile_one_pass 40 "$bin/gpt2_step_bench" "${rungs[@]}" --attention flash-one-pass --batch "$last_batch" \
  --steps 3 --profile --json "$out/profile_one_pass.json"
step attention_hs64 60 "$bin/ch09_attention_lab" --pass backward --version 7,9,12,13 --cpu-ceiling false \
  "${lab_size[@]}" --json "$out/attention_hs64.json"
step attention_hs128 60 "$bin/ch09_attention_lab" --pass backward --heads 6 --head-size 128 --version 7,9 \
  --cpu-ceiling false "${lab_size[@]}" --json "$out/attention_hs128.json"
step attention_forward 40 "$bin/ch09_attention_lab" --version 7,11,14,15 --cpu-ceiling false "${lab_size[@]}" \
  --json "$out/attention_forward.json"
step attention_forward_hs128 30 "$bin/ch09_attention_lab" --heads 6 --head-size 128 --version 7,14,15 \
  --cpu-ceiling false "${lab_size[@]}" --json "$out/attention_forward_hs128.json"
step classifier 30 "$bin/ch06_classifier_lab" --rows 8192 --dtype bf16 --version 5,6 --cpu-ceiling false \
  "${lab_size[@]}" --json "$out/classifier.json"

# ---------------------------------------------------------------- summary
{
  echo
  [ -f "$out/step_bench.md" ] && cat "$out/step_bench.md"
  for name in profile_two_passes profile_one_pass; do
    [ -f "$out/$name.log" ] || continue
    echo
    echo "## $name (the profile's first 30 lines; the whole one in $name.log)"
    echo
    echo '```'
    grep -n -m 1 -i "profile" "$out/$name.log" >/dev/null && sed -n "/[Pp]rofile/,\$p" "$out/$name.log" | head -n 30
    echo '```'
  done
  for name in attention_hs64 attention_hs128 attention_forward attention_forward_hs128 classifier; do
    [ -f "$out/$name.log" ] || continue
    echo
    echo "## $name"
    echo
    echo '```'
    grep -E '^ +(v[0-9]+ |device )' "$out/$name.log" || true
    echo '```'
  done
} >>"$summary"
echo "gpu_timings: summary in $summary ($((SECONDS - started)) s)"
cat "$summary"
exit "$status"
