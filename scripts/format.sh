#!/usr/bin/env bash
# Formats the project's C++/CUDA sources with clang-format (.clang-format at the root), or with --check
# lists the files that are not formatted and exits non-zero. Generated tables are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | grep -v 'common/text/unicode_tables.cpp')
if [[ "${1:-}" == "--check" ]]; then
  # Fifty files a process, one process a core: one clang-format a file took a minute of CI's time. Each file
  # not formatted is named in a -Wclang-format-violations diagnostic; a failure of any other kind fails too.
  status=0
  report=$(printf '%s\0' "${files[@]}" | xargs -0 -n 50 -P "$(nproc)" clang-format --dry-run --Werror 2>&1 >/dev/null) ||
    status=$?
  mapfile -t bad < <(grep -- '-Wclang-format-violations' <<<"$report" | cut -d: -f1 | sort -u)
  if [[ ${#bad[@]} -gt 0 ]]; then
    printf 'not formatted (run scripts/format.sh): %s\n' "${bad[@]}" >&2
    exit 1
  fi
  if [[ $status -ne 0 ]]; then
    printf 'clang-format failed:\n%s\n' "$report" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted"
else
  clang-format -i "${files[@]}"
fi
