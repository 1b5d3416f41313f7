#!/usr/bin/env bash
# gpu_bench.sh: our GPT-2 training step beside PyTorch's, in one run on the same GPU, as one table.
#
# For each batch size (default 8, 16 and 32 rows of T = 1024 tokens, GPT-2 124M "d12"), it runs
#   ours bf16        gpt2_step_bench --dtype bf16 (the 16-bit matmuls alone)
#   ours all rungs   gpt2_step_bench --dtype bf16 --kernels fused --activations 16bit --attention flash
#                    --cuda-graphs (every speed rung of the book)
#   ours one-pass    the same with --attention flash-one-pass: flash attention's backward in one pass, dQ by atomics
#   ours tuned       the same with --attention flash-tuned: flash attention's fastest kernel set on this GPU (64- or
#                    128-row tiles; the same bits), timed at the first step (GPU only: on the CPU it is flash)
#   ours + recompute the same with --recompute selective: the GELU outputs recomputed in backward, as llm.c does by
#                    default (its -r 1), so that the memory column compares like with like
#   ours + ln        the same with --recompute selective-ln: the LayerNorms' outputs recomputed too (llm.c's -r 2)
#   PyTorch eager    tools/compare/pytorch_gpt2_step.py --dtype bf16 (nanoGPT's model, SDPA, fused AdamW)
#   PyTorch compile  the same under torch.compile (PyTorch 2 on a GPU only)
# and writes a Markdown table of step time (median), tokens/s and the allocator's peak, each run's JSON beside it
# (bench_diff reads any two). A run that fails or passes its time limit leaves "failed" in its cell and the
# others go on.
#
#   scripts/gpu_bench.sh                       # builds gpt2_step_bench in build-gpu (as gpu_check.sh), then runs
#   scripts/gpu_bench.sh --skip-build --batches "8 16"
#   scripts/gpu_bench.sh --device cpu --model tiny --batches "1 2" --seq 32 --steps 2   # a smoke test, no GPU
#
# Exit status: 0 when every run gave a result; 1 when one failed; 2 for a bad flag or a build that failed.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: scripts/gpu_bench.sh [options]
  --build-dir DIR  the build with gpt2_step_bench (default: build-gpu in the repository)
  --skip-build     use BUILD_DIR as it is (otherwise configure for this GPU and build gpt2_step_bench)
  --device D       cuda (default) or cpu (a smoke test of the script: no CUDA graphs, no torch.compile)
  --model M        GPT-2 size (default d12)
  --batches "B.."  batch sizes (default "8 16 32")
  --seq T          sequence length (default 1024)
  --steps N        timed steps per run (default 20)
  --python PY      the Python with PyTorch (default: python3)
  --timeout S      seconds one run may take (default 300)
  --out FILE       the table (default: BUILD_DIR/gpu_bench.md); the JSONs go beside it
  -h, --help       this text
USAGE
}

die() {  # die STATUS MESSAGE...
  local status=$1
  shift
  echo "gpu_bench: error: $*" >&2
  exit "$status"
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="$repo/build-gpu"
skip_build=0
device=cuda
model=d12
batches="8 16 32"
seq=1024
steps=20
python=python3
timeout_s=300
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --skip-build) skip_build=1; shift ;;
    --build-dir | --device | --model | --batches | --seq | --steps | --python | --timeout | --out)
      [ $# -ge 2 ] || die 2 "$1 needs a value"
      case "$1" in
        --build-dir) build_dir=$2 ;;
        --device) device=$2 ;;
        --model) model=$2 ;;
        --batches) batches=$2 ;;
        --seq) seq=$2 ;;
        --steps) steps=$2 ;;
        --python) python=$2 ;;
        --timeout) timeout_s=$2 ;;
        --out) out=$2 ;;
      esac
      shift 2 ;;
    *) usage >&2; die 2 "unknown argument '$1'" ;;
  esac
done
[[ $device == cuda || $device == cpu ]] || die 2 "--device must be cuda or cpu, got '$device'"
for value in $batches "$seq" "$steps" "$timeout_s"; do
  [[ $value =~ ^[1-9][0-9]*$ ]] || die 2 "--batches, --seq, --steps and --timeout take positive integers, got '$value'"
done
[ -n "$batches" ] || die 2 "--batches is empty"
started=$SECONDS
phase() { echo "gpu_bench: == $* [$((SECONDS - started)) s]"; }

gpu="the CPU"
if [ "$device" = cuda ]; then
  command -v nvidia-smi >/dev/null 2>&1 || die 2 "nvidia-smi not found: --device cuda needs an NVIDIA GPU"
  gpu=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null | head -n 1) ||
    die 2 "nvidia-smi cannot query a GPU"
  [ -n "$gpu" ] || die 2 "nvidia-smi lists no GPU"
fi

# ---------------------------------------------------------------- build
if [ "$skip_build" -eq 0 ]; then
  [ "$device" = cuda ] || die 2 "--device cpu needs --skip-build and a built BUILD_DIR"
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
  arch=$(cut -d, -f2 <<<"$gpu" | xargs)
  arch=${arch/./}
  generator="Unix Makefiles"
  command -v ninja >/dev/null 2>&1 && generator=Ninja
  [ -f "$build_dir/CMakeCache.txt" ] && generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build_dir/CMakeCache.txt")
  phase "configure and build gpt2_step_bench for sm_$arch in $build_dir"
  cmake -S "$repo" -B "$build_dir" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DLAB_WITH_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=$arch" >/dev/null || die 2 "CMake configuration failed"
  cmake --build "$build_dir" --parallel "$(nproc)" --target gpt2_step_bench || die 2 "the build failed"
fi
bench="$build_dir/bin/gpt2_step_bench"
[ -x "$bench" ] || die 2 "$bench not found (build it, or drop --skip-build)"
out=${out:-$build_dir/gpu_bench.md}
mkdir -p "$(dirname "$out")" || die 2 "cannot create the directory of $out"
json_dir=$(dirname "$out")

# ---------------------------------------------------------------- runs
# label|command: what each column runs, before the shape flags.
all_rungs="--kernels fused --activations 16bit --attention flash"
[ "$device" = cuda ] && all_rungs+=" --cuda-graphs"
columns=("ours bf16|$bench --dtype bf16"
  "ours all rungs|$bench --dtype bf16 $all_rungs"
  "ours one-pass|$bench --dtype bf16 ${all_rungs/--attention flash/--attention flash-one-pass}")
# On the CPU flash-tuned is flash itself: a GPU column.
[ "$device" = cuda ] && columns+=("ours tuned|$bench --dtype bf16 ${all_rungs/--attention flash/--attention flash-tuned}")
columns+=("ours + recompute|$bench --dtype bf16 $all_rungs --recompute selective"
  "ours + ln|$bench --dtype bf16 $all_rungs --recompute selective-ln"
  "PyTorch eager|$python $repo/tools/compare/pytorch_gpt2_step.py --dtype bf16")
[ "$device" = cuda ] && columns+=("PyTorch compile|$python $repo/tools/compare/pytorch_gpt2_step.py --dtype bf16 --compile")

failed=0
table_args=()
for b in $batches; do
  for column in "${columns[@]}"; do
    label=${column%%|*}
    read -r -a command <<<"${column#*|}"
    json="$json_dir/gpu_bench_b${b}_$(tr ' ' '_' <<<"$label").json"
    rm -f "$json"
    phase "$label, B=$b: ${command[*]} --model $model --device $device --batch $b --seq $seq --steps $steps"
    if ! timeout -k 10 "$timeout_s" "${command[@]}" --model "$model" --device "$device" --batch "$b" --seq "$seq" \
      --steps "$steps" --json "$json"; then
      echo "gpu_bench: $label at B=$b failed (or ran past $timeout_s s)" >&2
      rm -f "$json"
      failed=1
    fi
    table_args+=("$b" "$label" "$json")
  done
done

# ---------------------------------------------------------------- table
phase "table"
"$python" - "$out" "$model" "$seq" "$steps" "$gpu" "$(date -u +%Y-%m-%d)" \
  "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" "${table_args[@]}" <<'PY'
import json, os, sys

out, model, seq, steps, gpu, date, commit, *runs = sys.argv[1:]
cells, labels, batches = {}, [], []
for i in range(0, len(runs), 3):
    b, label, path = runs[i:i + 3]
    if label not in labels:
        labels.append(label)
    if b not in batches:
        batches.append(b)
    text = "failed"
    if os.path.exists(path):
        row = json.load(open(path))["rows"][0]
        text = f"{row['ms_median']:.1f} ms, {row['tokens_per_s'] / 1e3:.0f}k tok/s"
        if row.get("mem_peak_bytes"):
            text += f", {row['mem_peak_bytes'] / 1e9:.1f} GB"
    cells[(b, label)] = text
lines = [f"GPT-2 {model}, T={seq}, bf16, median of {steps} steps; {gpu}, {date}, commit {commit}", "",
         "| B | " + " | ".join(labels) + " |", "| --- |" + " --- |" * len(labels)]
lines += ["| " + b + " | " + " | ".join(cells[(b, l)] for l in labels) + " |" for b in batches]
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text, end="")
PY
echo "gpu_bench: table in $out"
exit "$failed"
