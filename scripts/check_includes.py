#!/usr/bin/env python3
"""Every source and every header compiles against libc++ with its transitive includes removed.

GCC 13's standard headers include less than GCC 12's, and libc++'s far less again: a file that uses
`uint8_t` and gets <cstdint> only through <string> builds with one compiler and fails with the next. This
check compiles, without code generation (`-fsyntax-only`):

  * every translation unit of a configured build (its compile_commands.json: the project's sources, the
    tests and the tools; configure the CUDA emulation build so that the .cu files are C++ too), and
  * every project header on its own, so a header that leans on what its includer happened to include fails
    even where every includer is fine today; it gets the flags (include paths, compile definitions such as
    a test's LAB_MPIEXEC) of a translation unit that includes it, directly or through other headers, or,
    for a header no translation unit includes, those of a translation unit of the same kind,

with clang and `-stdlib=libc++ -D_LIBCPP_REMOVE_TRANSITIVE_INCLUDES`. Nothing is linked and nothing runs.

libc++'s headers are read as clang modules (`-fmodules`, the module map libc++ ships): each is parsed once into
a cache in BUILD_DIR (libcxx-modules/) instead of once in every file: the whole check took 303 s instead of
615 s on 2 cores. A module makes visible only what its header declares, so a file that uses a name its own includes do
not declare still fails: `std::vector` after only <string>, `std::sort` after only <vector>. Modules are
stricter than textual inclusion where libc++'s headers still include more than they declare (`std::memcpy`
after only <algorithm>, `std::array` after only <span>): those fail here too, as they would with another
standard library. The project's own headers and the other libraries' (GoogleTest, MPI, Boost) are included
as text.

  scripts/check_includes.py BUILD_DIR [--jobs N] [--compiler clang++-16] [--only PATTERN ...]

BUILD_DIR is configured with clang (CC=clang-16 CXX=clang++-16 cmake -S . -B BUILD_DIR
-DLAB_CUDA_EMULATION=ON); scripts/test.sh does both. --only checks just the files whose path (relative to
the repository) contains one of the patterns, to re-check the failures of a full run. Exit status 1 lists
every file that failed.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

LIBCXX_FLAGS = ["-stdlib=libc++", "-D_LIBCPP_REMOVE_TRANSITIVE_INCLUDES", "-fmodules", "-fcxx-modules"]
MODULE_CACHE = "libcxx-modules"  # inside BUILD_DIR
HEADER_SUFFIXES = {".h", ".cuh"}
# Folders of the repository whose headers belong to the project (the emulator's stand-in toolkit headers
# are checked through the sources that include them: they are written to be included in their own order).
PROJECT_DIRS = ["common", "ch05_data", "ch06_single_gpu", "ch07_memory", "ch08_distributed", "ch09_advanced",
                "ch10_gpt2", "tests", "tools"]
SKIPPED_HEADER_DIRS = ["common/cuda/emulation/include"]
# The project includes its own headers by their path from the repository root: #include "common/core/error.h".
PROJECT_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def syntax_only(argv, compiler, module_cache):
    """A compile command turned into a syntax check: no -c, no -o FILE, clang and libc++ as modules."""
    out = [compiler]
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
            continue
        if arg == "-o":
            skip = True
            continue
        if arg == "-c":
            continue
        out.append(arg)
    return out[:1] + LIBCXX_FLAGS + [f"-fmodules-cache-path={module_cache}", "-fsyntax-only"] + out[1:]


def header_command(template, header, compiler, module_cache):
    """The flags of a translation unit, applied to a header compiled on its own as C++."""
    argv = syntax_only(template, compiler, module_cache)
    source = argv[-1]
    assert source.endswith((".cpp", ".cu", ".cc")), source
    # A header is the main file here, where `#pragma once` is pointless but harmless.
    return argv[:-1] + ["-Wno-pragma-once-outside-header", "-x", "c++", header]


def includers_of(repo, files):
    """For each file the project includes, the files of `files` (paths from the repository root) that include it."""
    includers = collections.defaultdict(list)
    for rel in files:
        for included in PROJECT_INCLUDE.findall((repo / rel).read_text(errors="replace")):
            includers[included].append(rel)
    return includers


def including_unit(header, includers, units):
    """The first translation unit of `units` that includes `header`, directly or through other headers."""
    seen = {header}
    queue = collections.deque([header])
    while queue:
        for includer in includers.get(queue.popleft(), []):
            if includer in units:
                return includer
            if includer not in seen:
                seen.add(includer)
                queue.append(includer)
    return None


def run(argv, cwd):
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    return result.returncode, result.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--compiler", default="clang++-16")
    parser.add_argument("--only", nargs="+", metavar="PATTERN", help="check only the files whose path contains one")
    args = parser.parse_args()

    repo = Path(__file__).resolve().parent.parent
    database = Path(args.build_dir) / "compile_commands.json"
    if not database.is_file():
        sys.exit(f"check_includes: {database} not found (configure BUILD_DIR with CMake first)")
    entries = json.loads(database.read_text())
    module_cache = str((Path(args.build_dir) / MODULE_CACHE).resolve())

    jobs = []  # (label, argv, cwd)
    units = {}  # label -> (the translation unit's compile command, the folder it runs in)
    cpp_template = cu_template = test_template = None
    for entry in entries:
        argv = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
        source = Path(entry["file"])
        try:
            label = str(source.resolve().relative_to(repo))
        except ValueError:
            continue  # a dependency's source built in the tree (a GoogleTest source tree): not ours
        units.setdefault(label, (argv, entry["directory"]))
        jobs.append((label, syntax_only(argv, args.compiler, module_cache), entry["directory"]))
        # A header that no translation unit includes borrows the flags of one of the same kind: the emulation's
        # include path for the CUDA headers, GoogleTest's for the tests' headers.
        if label.endswith(".cu") and cu_template is None:
            cu_template = units[label]
        elif label.startswith("tests/") and test_template is None:
            test_template = units[label]
        elif label.startswith("common/") and label.endswith(".cpp") and cpp_template is None:
            cpp_template = units[label]
    if not jobs:
        sys.exit(f"check_includes: no project source in {database}")

    headers = []
    for folder in PROJECT_DIRS:
        for path in sorted((repo / folder).rglob("*")):
            rel = str(path.relative_to(repo))
            if path.suffix in HEADER_SUFFIXES and not any(rel.startswith(d) for d in SKIPPED_HEADER_DIRS):
                headers.append(rel)
    includers = includers_of(repo, sorted(units) + headers)
    for rel in headers:
        unit = including_unit(rel, includers, units)
        if unit is not None:
            template = units[unit]
        else:
            template = test_template if rel.startswith("tests/") else cpp_template
            if rel.endswith(".cuh") or "/cuda/" in rel:
                template = cu_template or template
        if template is None:
            sys.exit("check_includes: the build has no translation unit to take header flags from")
        argv, directory = template
        jobs.append((rel, header_command(argv, str(repo / rel), args.compiler, module_cache), directory))

    if args.only:
        jobs = [job for job in jobs if any(pattern in job[0] for pattern in args.only)]
        headers = [rel for rel in headers if any(pattern in rel for pattern in args.only)]
    print(f"check_includes: {len(jobs) - len(headers)} translation units and {len(headers)} headers, "
          f"{args.compiler} with {' '.join(LIBCXX_FLAGS)} -fsyntax-only, {args.jobs} jobs", flush=True)
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run, argv, cwd): label for label, argv, cwd in jobs}
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            status, errors = future.result()
            if status != 0:
                failures.append((futures[future], errors))
            if done % 100 == 0:
                print(f"check_includes: {done}/{len(jobs)} checked, {len(failures)} failed", flush=True)
    for label, errors in sorted(failures):
        print(f"\n--- {label}\n{errors.strip()}")
    if failures:
        print(f"\ncheck_includes: {len(failures)} of {len(jobs)} files do not compile against libc++:")
        for label, _ in sorted(failures):
            print(f"  {label}")
        sys.exit(1)
    print(f"check_includes: all {len(jobs)} files compile against libc++")


if __name__ == "__main__":
    main()
