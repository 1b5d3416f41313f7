#!/usr/bin/env bash
# Builds and runs one chapter's labs and writes their results: one command per chapter.
#
#   scripts/lab.sh chNN [LAB] [--build-dir DIR] [--jobs N] [--quick] [-- ARGS...]
#
# --quick asks each program for a run of seconds (kernel labs: their --quick, a smaller problem and 3 repeats;
# the benchmarks: a small model, fewer steps and repeats): numbers to check that it works, not to publish.
#
# A chapter's labs are
#   - every executable named chNN_<lab>_lab (the convention: a kernel lab registers itself just by building such
#     a program, e.g. ch06_matmul_lab from ch06_single_gpu/kernels/01_matmul/CMakeLists.txt; it must accept
#     --json FILE, as every program built on common/lab/lab_main.h does);
#   - and the benchmarks listed below, which predate the convention:
#       ch05  loader  ch05_loader_bench   loader throughput and data-stall fraction (--quick: its short run)
#       ch06  staircase  gpt2_step_bench --staircase ch06   the chapter's training-step staircase
#       ch07  memory  ch07_memory_bench   the memory staircase: peak bytes by category and step time per rung
#       ch08  dist    ch08_dist_bench     the collectives, under mpirun -np 2 --oversubscribe
#       ch10  step    gpt2_step_bench     one GPT-2 training step against its GEMM floor or the GPU's peak
#
# LAB picks one of them by its name (matmul, loader, ...). Each writes DIR/results/chNN/<lab>.json (a bench
# result: bench_diff compares two, scripts/plot_bench.py draws one); ARGS after -- go to every lab program.
# DIR (default: build) is configured as a Release build when it does not exist yet; an existing one keeps its
# configuration, so --build-dir build-emu runs the labs of the CUDA emulation build, whose CUDA versions are
# validated on the CPU and whose times are CPU times (the labs mark them "emulated").
# Exits non-zero when a lab fails (a version that fails validation fails its lab); the others still run.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,24p' "$0"; }

CHAPTER=""
LAB=""
BUILD_DIR=build
JOBS=$(nproc)
QUICK=0
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD_DIR="${2:?--build-dir needs a directory}"; shift ;;
    --jobs) JOBS="${2:?--jobs needs a number}"; shift ;;
    --quick) QUICK=1 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    -*) echo "scripts/lab.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *)
      if [[ -z $CHAPTER ]]; then CHAPTER="$1"
      elif [[ -z $LAB ]]; then LAB="$1"
      else echo "scripts/lab.sh: unexpected argument '$1' (see --help)" >&2; exit 2
      fi ;;
  esac
  shift
done
if [[ ! $CHAPTER =~ ^ch[0-9][0-9]$ ]]; then
  echo "scripts/lab.sh: give a chapter as chNN, e.g. scripts/lab.sh ch06 (see --help)" >&2
  exit 2
fi

# The benchmarks that are not named chNN_<lab>_lab: "chapter lab program".
REGISTERED=(
  "ch05 loader ch05_loader_bench"
  "ch06 staircase gpt2_step_bench"
  "ch07 memory ch07_memory_bench"
  "ch08 dist ch08_dist_bench"
  "ch10 step gpt2_step_bench"
)

if [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
  if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export PATH=/usr/local/cuda/bin:$PATH
  fi
  echo "== configure ($BUILD_DIR)"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi

# name -> program, for the chapter's labs.
declare -A PROGRAM=()
for entry in "${REGISTERED[@]}"; do
  read -r chapter name program <<<"$entry"
  [[ $chapter == "$CHAPTER" ]] && PROGRAM[$name]=$program
done
while read -r target; do
  name=${target#"${CHAPTER}_"}
  PROGRAM[${name%_lab}]=$target
done < <(cmake --build "$BUILD_DIR" --target help | grep -oE "\b${CHAPTER}_[A-Za-z0-9_]+_lab\b" | sort -u)

if [[ ${#PROGRAM[@]} -eq 0 ]]; then
  echo "scripts/lab.sh: $CHAPTER has no labs in $BUILD_DIR (no ${CHAPTER}_*_lab program, none registered)" >&2
  exit 2
fi
NAMES=$(printf '%s\n' "${!PROGRAM[@]}" | sort)
if [[ -n $LAB ]]; then
  if [[ -z ${PROGRAM[$LAB]:-} ]]; then
    echo "scripts/lab.sh: $CHAPTER has no lab '$LAB'; it has: $(echo $NAMES)" >&2
    exit 2
  fi
  NAMES=$LAB
fi

TARGETS=()
for name in $NAMES; do TARGETS+=("${PROGRAM[$name]}"); done
echo "== build: ${TARGETS[*]}"
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${TARGETS[@]}"

if grep -q '^LAB_CUDA_EMULATION:BOOL=ON' "$BUILD_DIR/CMakeCache.txt"; then
  echo "note: $BUILD_DIR is the CUDA emulation build: CUDA versions run on the CPU, their times say nothing about a GPU"
fi

RESULTS="$BUILD_DIR/results/$CHAPTER"
mkdir -p "$RESULTS"
if [[ $(id -u) == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

FAILED=()
WRITTEN=()
for name in $NAMES; do
  program=${PROGRAM[$name]}
  json="$RESULTS/$name.json"
  command=("$BUILD_DIR/bin/$program" --json "$json")
  [[ $CHAPTER/$name == ch06/staircase ]] && command+=(--staircase ch06)
  if [[ $QUICK == 1 ]]; then
    case "$program" in
      ch05_loader_bench) command+=(--quick) ;;
      ch08_dist_bench) command+=(--max-bytes 1048576 --repeats 3) ;;
      ch07_memory_bench) command+=(--model small --steps 1) ;;
      gpt2_step_bench) command+=(--model small --steps 3 --warmup 1 --gemm-repeats 2) ;;
      *) command+=(--quick) ;;  # a kernel lab: its smaller problem, 1 warm-up, 3 repeats
    esac
  fi
  [[ $program == ch08_dist_bench ]] && command=(mpirun -np 2 --oversubscribe "${command[@]}")
  command+=("${EXTRA[@]}")
  echo "== $CHAPTER $name: ${command[*]}"
  if "${command[@]}"; then
    WRITTEN+=("$json")
  else
    FAILED+=("$name")
    [[ -f $json ]] && WRITTEN+=("$json")
  fi
done

echo "== results of $CHAPTER"
for json in "${WRITTEN[@]}"; do echo "  $json"; done
if [[ ${#FAILED[@]} -gt 0 ]]; then
  echo "scripts/lab.sh: failed: ${FAILED[*]}" >&2
  exit 1
fi
