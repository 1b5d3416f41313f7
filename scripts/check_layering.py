#!/usr/bin/env python3
"""Checks that the project's dependencies run one way: the shared core (common/) includes no chapter, and a
chapter includes the core and earlier chapters only (ch07_memory may include ch06_single_gpu, never
ch08_distributed). Chapter 10 is the top: the trainer and the composition of every chapter's rungs live there.
One exception, for programs: a chapter's bench programs (its bench/ and tools/ folders) may include the composition
layer (ch10_gpt2's lab_rungs: the run configuration and its builder, COMPOSITION below), so that each chapter's
bench runs its staircase on the trainer's own builder; nothing else of a later chapter.

Every tracked C++ and CUDA source under common/ and chNN_*/ is read for its #include "..." lines. Tests, tools and
scripts may include anything. Prints each violation as `file:line: includes path (chapter A includes chapter B)`.

Exit status: 0 when there is none, 1 when there is one or more.

    python3 scripts/check_layering.py
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
CHAPTER = re.compile(r"^ch(\d\d)_")
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
# The headers of ch10_gpt2's lab_rungs library (ch10_gpt2/CMakeLists.txt).
COMPOSITION = {"ch10_gpt2/run_config.h", "ch10_gpt2/run_settings.h", "ch10_gpt2/model_rungs.h",
               "ch10_gpt2/memory_steps.h", "ch10_gpt2/run_memory_theory.h", "ch10_gpt2/step_staircase.h"}


def layer(path):
    """0 for common/, NN for chNN_*/, None for anything else (tests, tools, scripts, third-party)."""
    top = path.split("/", 1)[0]
    if top == "common":
        return 0
    match = CHAPTER.match(top)
    return int(match.group(1)) if match else None


def name(level):
    return "common" if level == 0 else f"chapter {level}"


def main():
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        print("check_layering: not a git checkout", file=sys.stderr)
        return 2
    violations = []
    checked = 0
    for path in listed.stdout.split():
        if not path.endswith(SOURCE_SUFFIXES) or layer(path) is None:
            continue
        checked += 1
        own = layer(path)
        for number, line in enumerate((ROOT / path).read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = layer(match.group(1))
            if target is None:
                continue
            program = any(part in ("bench", "tools") for part in path.split("/")[1:-1])
            if own > 0 and target > own and program and match.group(1) in COMPOSITION:
                continue
            if (own == 0 and target != 0) or (own > 0 and target > own):
                violations.append(f"{path}:{number}: includes {match.group(1)} ({name(own)} includes {name(target)})")
    for v in violations:
        print(v)
    print(f"check_layering: {checked} files, {len(violations)} includes against the layering "
          "(common includes no chapter; a chapter includes earlier chapters only)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
