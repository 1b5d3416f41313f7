#!/usr/bin/env bash
# Formats the project's C++/CUDA sources with clang-format (.clang-format at the root), or with --check
# lists the files that are not formatted and exits non-zero. Generated tables are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | grep -v 'common/text/unicode_tables.cpp')
if [[ "${1:-}" == "--check" ]]; then
  bad=()
  for f in "${files[@]}"; do clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f"); done
  if [[ ${#bad[@]} -gt 0 ]]; then
    printf 'not formatted (run scripts/format.sh): %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted"
else
  clang-format -i "${files[@]}"
fi
