#!/usr/bin/env python3
"""The report of scripts/gpu_check.sh: the machine, the CUDA tests by name, and the step-benchmark rows.

ctest's JUnit file (ctest --output-junit) gives each test's status; its log gives what JUnit may not say in
every CMake version (a test killed by the per-test timeout is "***Timeout" there). Failed, timed-out and skipped
tests are listed by name, skipped ones with the reason GoogleTest printed (GTEST_SKIP's message).

  scripts/gpu_report.py --junit FILE --ctest-log FILE --cache BUILD_DIR/CMakeCache.txt \
      --fact "GPU=1 x NVIDIA H100 ..." ... [--bench DTYPE=FILE.json ...] --out REPORT.md

Prints the report and writes it to --out. Exit status 0; the counts are on the line starting "CUDA tests:".
Standard library only: it runs on a bare GPU machine.
"""
import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def parse_junit(path):
    """{test name: (status, output)} with status passed, failed or skipped, from ctest's JUnit file."""
    results = {}
    if not path or not Path(path).is_file():
        return results
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return results
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        status = case.get("status", "")
        output = " ".join((node.text or "") for node in case.iter("system-out"))
        if case.find("skipped") is not None or status in ("notrun", "disabled", "skipped"):
            results[name] = ("skipped", output)
        elif case.find("failure") is not None or case.find("error") is not None or status == "fail":
            results[name] = ("failed", output)
        else:
            results[name] = ("passed", output)
    return results


def parse_ctest_log(path):
    """{test name: status} from ctest's progress lines: Passed, ***Failed, ***Timeout, ***Skipped, Not Run."""
    statuses = {}
    if not path or not Path(path).is_file():
        return statuses
    line_re = re.compile(r"Test\s+#\d+: (\S+) \.*\s*(\*\*\*)?(Passed|Failed|Timeout|Skipped|Not Run|Exception|"
                         r"Subprocess aborted|SEGFAULT)")
    for line in Path(path).read_text(errors="replace").splitlines():
        m = line_re.search(line)
        if not m:
            continue
        word = m.group(3)
        statuses[m.group(1)] = {"Passed": "passed", "Timeout": "timed out", "Skipped": "skipped",
                                "Not Run": "skipped"}.get(word, "failed")
    return statuses


def skip_reason(output):
    """GoogleTest's skip message, e.g. "needs 2 GPUs (NCCL wants one per rank), 1 visible: skipped"."""
    for line in output.splitlines():
        line = line.strip()
        if line and "Skipped" not in line and not line.startswith(("[", "Running main", "Note:")):
            return line
    return ""


def merge(junit, log):
    """Every test's final status: the log's timeouts win, since JUnit reports them as plain failures."""
    names = sorted(set(junit) | set(log))
    merged = {}
    for name in names:
        status, output = junit.get(name, (log.get(name, "failed"), ""))
        if log.get(name) == "timed out":
            status = "timed out"
        merged[name] = (status, output)
    return merged


def read_cache(path):
    """The C++ compiler, its kind and version: from CMakeCache.txt and, beside it, the compiler CMake identified
    (CMakeFiles/<cmake version>/CMakeCXXCompiler.cmake)."""
    facts = {}
    if not path or not Path(path).is_file():
        return facts
    for line in Path(path).read_text(errors="replace").splitlines():
        for key in ("CMAKE_CXX_COMPILER:", "CMAKE_CXX_COMPILER_VERSION:"):
            if line.startswith(key):
                facts[key.rstrip(":")] = line.split("=", 1)[1]
    for identified in sorted(Path(path).parent.glob("CMakeFiles/*/CMakeCXXCompiler.cmake")):
        for m in re.finditer(r'set\((CMAKE_CXX_COMPILER_(?:ID|VERSION)) "([^"]*)"\)', identified.read_text()):
            facts.setdefault(m.group(1), m.group(2))
    return facts


def bench_row(dtype, path):
    if not Path(path).is_file():
        return f"| {dtype} | failed (no result) | | | | |"
    try:
        r = json.loads(Path(path).read_text())
    except json.JSONDecodeError:
        return f"| {dtype} | failed (unreadable result) | | | | `{path}` |"

    # gpt2_step_bench writes one row per run: the step's numbers are there.
    row = r["rows"][0] if isinstance(r.get("rows"), list) and r["rows"] and isinstance(r["rows"][0], dict) else r

    def get(key):
        return row.get(key)

    ms, tokens, mfu, peak, mem = (get(k) for k in ("ms_median", "tokens_per_s", "mfu", "peak_name", "mem_peak_bytes"))
    ms_text = f"{ms:.1f}" if isinstance(ms, (int, float)) else "?"
    tokens_text = f"{tokens:.0f}" if isinstance(tokens, (int, float)) else "?"
    mfu_text = f"{100 * mfu:.1f}% of {peak}" if isinstance(mfu, (int, float)) else "peak not known for this GPU"
    mem_text = f"{mem / 2**30:.2f} GiB" if isinstance(mem, (int, float)) else "?"
    return f"| {dtype} | {ms_text} | {tokens_text} | {mfu_text} | {mem_text} | `{path}` |"


def report(args):
    tests = merge(parse_junit(args.junit), parse_ctest_log(args.ctest_log))
    by_status = {}
    for name, (status, output) in tests.items():
        by_status.setdefault(status, []).append((name, output))
    count = {s: len(by_status.get(s, [])) for s in ("passed", "failed", "timed out", "skipped")}
    cache = read_cache(args.cache)
    lines = ["# GPU check", ""]
    lines += [f"- {fact.split('=', 1)[0]}: {fact.split('=', 1)[1]}" for fact in args.fact if "=" in fact]
    if cache.get("CMAKE_CXX_COMPILER"):
        kind = " ".join(cache[k] for k in ("CMAKE_CXX_COMPILER_ID", "CMAKE_CXX_COMPILER_VERSION") if cache.get(k))
        lines.append(f"- host compiler: {cache['CMAKE_CXX_COMPILER']}" + (f" ({kind})" if kind else ""))
    lines += ["", f"CUDA tests: {count['passed']} passed, {count['failed']} failed, {count['timed out']} timed out, "
              f"{count['skipped']} skipped, of {len(tests)}"]
    for status, title in (("failed", "Failed"), ("timed out", "Timed out (killed by the per-test timeout)"),
                          ("skipped", "Skipped")):
        if by_status.get(status):
            lines += ["", f"{title}:", ""]
            for name, output in by_status[status]:
                reason = skip_reason(output) if status == "skipped" else ""
                lines.append(f"- `{name}`" + (f": {reason}" if reason else ""))
    if args.bench:
        lines += ["", args.bench_title or "GPT-2 training step:", "",
                  "| dtype | ms/step (median) | tokens/s | MFU | peak memory | result |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for item in args.bench:
            dtype, _, path = item.partition("=")
            lines.append(bench_row(dtype, path))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--junit", help="ctest --output-junit FILE")
    parser.add_argument("--ctest-log", help="ctest's output")
    parser.add_argument("--cache", help="the build's CMakeCache.txt")
    parser.add_argument("--fact", action="append", default=[], help="NAME=VALUE, a line of the machine's list")
    parser.add_argument("--bench", action="append", default=[], help="DTYPE=FILE, a gpt2_step_bench --json result")
    parser.add_argument("--bench-title", default="")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    text = report(args)
    Path(args.out).write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
