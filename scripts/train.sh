#!/usr/bin/env bash
# The main job: installs what the build needs (Debian 12), builds the programs of the README's table (gpt2_train,
# gpt2_sample, gpt2_step_bench, gpt2_tokenize, ch05_loader_bench, bench_diff) into build/bin/, and runs
# build/bin/gpt2_train with no flags: a small GPT-2 trained on the bundled tiny Shakespeare on the best device
# present, ending with a sample, its checkpoint kept under runs/.
# Any arguments are passed on to gpt2_train (e.g. scripts/train.sh --steps 100).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install_deps.sh
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target gpt2_train gpt2_sample gpt2_step_bench gpt2_tokenize ch05_loader_bench bench_diff
exec build/bin/gpt2_train "$@"
