#!/usr/bin/env python3
"""The report of scripts/gpu_check.sh: the machine, the CUDA tests by name, the step-benchmark rows, the verdict.

Each test's result comes from ctest's JUnit file (ctest --output-junit), checked against its log, which says what
the JUnit file of some CMake versions does not: CMake 3.25 writes a timed-out test as a plain failure, and only
the log's "***Timeout" tells the two apart. A test that ctest never started (the check's deadline, ctest's
--stop-time, passed first) is in neither: the list of the tests that should have run (ctest --show-only=json-v1)
names it. Failed, timed-out, not-run and skipped tests are listed by name, skipped ones with the reason the test
gave (GoogleTest prints GTEST_SKIP's message under a "file:line: Skipped" line).

  scripts/gpu_report.py --junit FILE --ctest-log FILE --test-list FILE --cache BUILD_DIR/CMakeCache.txt \
      --fact "GPU=1 x NVIDIA H100 ..." ... [--bench DTYPE=FILE.json ...] --out REPORT.md

Prints the report and writes it to --out. Exit status: 0 when every listed test passed or skipped, fewer skipped
than passed, and every benchmark gave a result; 1 otherwise (the report's last line says why); 2 when the report
cannot be written. Standard library only: it runs on a bare GPU machine.
"""
import argparse
import json
import re
import sys
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

PASSED, FAILED, TIMED_OUT, NOT_RUN, SKIPPED = "passed", "failed", "timed out", "not run", "skipped"
# A line of ctest's progress: "3/8 Test #3: S.Hang .........***Timeout   3.00 sec" (the dots may be absent).
PROGRESS_LINE = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(Passed|\*\*\*.*?)\s+[\d.]+ sec\s*$")
STOP_TIME_PASSED = "The stop time has been passed"


@dataclass
class Result:
    status: str
    detail: str = ""  # a skip's reason, a failure's kind, why a test did not run
    output: str = ""


def skip_reason(output):
    """What a skipped test said: GTEST_SKIP's message (every distinct one, for a job of several skipped tests),
    else the first line of a test that skipped by its exit code."""
    lines = output.splitlines()
    reasons = []
    for i, line in enumerate(lines):
        if re.search(r"(^|: )Skipped$", line.strip()):
            message = []
            for following in lines[i + 1:]:
                if not following.strip() or following.startswith("["):
                    break
                message.append(following.strip())
            if message and " ".join(message) not in reasons:
                reasons.append(" ".join(message))
    if not reasons:
        noise = ("[", "Running main", "Note:")
        reasons = [line.strip() for line in lines if line.strip() and not line.strip().startswith(noise)][:1]
    text = "; ".join(reasons)
    return text if len(text) <= 300 else text[:297] + "..."


def parse_junit(path):
    """{test name: Result} from ctest's JUnit file; {} when there is none."""
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
        output = "".join((node.text or "") for node in case.iter("system-out"))
        skipped = case.find("skipped")
        failure = case.find("failure") if case.find("failure") is not None else case.find("error")
        if status == "disabled":
            results[name] = Result(SKIPPED, "disabled", output)
        elif status == "notrun" or skipped is not None:
            # ctest writes both a test that skipped itself (SKIP_RETURN_CODE=77, SKIP_REGULAR_EXPRESSION_MATCHED)
            # and one it could not start ("Unable to find executable") as skipped; only the first is a skip.
            message = skipped.get("message", "") if skipped is not None else ""
            if message and not message.startswith("SKIP_"):
                results[name] = Result(NOT_RUN, message, output)
            else:
                results[name] = Result(SKIPPED, skip_reason(output), output)
        elif status == "fail" or failure is not None:
            # CMake 4 names the failure ("Timeout", "SEGFAULT", "Failed"); 3.25 leaves the message empty.
            message = failure.get("message", "") if failure is not None else ""
            if message == "Timeout":
                results[name] = Result(TIMED_OUT, "", output)
            else:
                results[name] = Result(FAILED, "" if message in ("", "Failed") else message, output)
        else:
            results[name] = Result(PASSED, "", output)
    return results


def parse_ctest_log(path):
    """({test name: Result}, whether ctest stopped at its --stop-time) from ctest's console output."""
    results = {}
    if not path or not Path(path).is_file():
        return results, False
    text = Path(path).read_text(errors="replace")
    for line in text.splitlines():
        m = PROGRESS_LINE.match(line)
        if not m:
            continue
        name, word = m.group(1), m.group(2).lstrip("*").strip()
        if word == "Passed":
            results[name] = Result(PASSED)
        elif word.startswith("Timeout"):
            results[name] = Result(TIMED_OUT)
        elif word.startswith("Skipped"):
            results[name] = Result(SKIPPED)
        elif word.startswith("Not Run (Disabled)"):
            results[name] = Result(SKIPPED, "disabled")
        elif word.startswith("Not Run"):
            results[name] = Result(NOT_RUN, "ctest could not start it")
        else:  # Failed, "Exception: SegFault", ...
            results[name] = Result(FAILED, "" if word.startswith("Failed") else word)
    return results, STOP_TIME_PASSED in text


def parse_test_list(path):
    """The names of the tests that should have run, from ctest --show-only=json-v1; [] when unknown."""
    if not path or not Path(path).is_file():
        return []
    try:
        return [test["name"] for test in json.loads(Path(path).read_text()).get("tests", []) if "name" in test]
    except (json.JSONDecodeError, AttributeError, TypeError):
        return []


def merge(junit, log, listed, stop_time_passed):
    """Every test's result: JUnit's, with the log's word for a failure JUnit does not name (CMake 3.25 writes a
    timeout or a crash as a plain failure); the log's alone without a JUnit file; and a listed test that neither
    mentions did not run."""
    never_started = ("never started: the test phase's deadline passed first" if stop_time_passed
                     else "no result from ctest")
    merged = {}
    for name in sorted(set(junit) | set(log) | set(listed)):
        result = junit.get(name) or log.get(name) or Result(NOT_RUN, never_started)
        in_log = log.get(name)
        if result.status == FAILED and in_log and in_log.status in (TIMED_OUT, FAILED) and not result.detail:
            result = Result(in_log.status, in_log.detail, result.output)  # "Timeout", "Exception: SegFault"
        merged[name] = result
    return merged


def read_compilers(cache_path):
    """{"C++": "path (ID version)", "CUDA": ...}: the compilers CMake used, from CMakeCache.txt and, beside it,
    what CMake identified (CMakeFiles/<cmake version>/CMake<LANG>Compiler.cmake: the version is not cached)."""
    compilers = {}
    if not cache_path or not Path(cache_path).is_file():
        return compilers
    cache = {}
    for line in Path(cache_path).read_text(errors="replace").splitlines():
        m = re.match(r"(CMAKE_(?:CXX|CUDA)_COMPILER(?:_ID|_VERSION)?):\w+=(.*)", line)
        if m:
            cache[m.group(1)] = m.group(2)
    for lang in ("CXX", "CUDA"):
        identified = {}
        for path in sorted(Path(cache_path).parent.glob(f"CMakeFiles/*/CMake{lang}Compiler.cmake")):
            for m in re.finditer(rf'set\((CMAKE_{lang}_COMPILER(?:_ID|_VERSION)?) "([^"]*)"\)', path.read_text()):
                identified.setdefault(m.group(1), m.group(2))

        def get(key):
            return cache.get(key) or identified.get(key, "")

        path = get(f"CMAKE_{lang}_COMPILER")
        if path:
            kind = " ".join(v for v in (get(f"CMAKE_{lang}_COMPILER_ID"), get(f"CMAKE_{lang}_COMPILER_VERSION")) if v)
            compilers["C++" if lang == "CXX" else lang] = path + (f" ({kind})" if kind else "")
    return compilers


def bench_row(dtype, path):
    """(the table row of one gpt2_step_bench --json result, whether there was a result)."""
    try:
        result = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return f"| {dtype} | failed (no result) | | | | |", False
    except (OSError, json.JSONDecodeError):
        return f"| {dtype} | failed (unreadable result) | | | | `{path}` |", False
    # gpt2_step_bench writes one row per run; the step's numbers are there.
    rows = result.get("rows") if isinstance(result, dict) else None
    row = rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], dict) else {}
    ms, tokens, mfu, peak, mem = (row.get(k) for k in ("ms_median", "tokens_per_s", "mfu", "peak_name",
                                                        "mem_peak_bytes"))
    if not isinstance(ms, (int, float)):
        return f"| {dtype} | failed (no step time in the result) | | | | `{path}` |", False

    def number(value, form):
        return form.format(value) if isinstance(value, (int, float)) else "?"

    mfu_text = f"{100 * mfu:.1f}% of {peak}" if isinstance(mfu, (int, float)) else "peak not known for this GPU"
    mem_text = number(mem / 2**30 if isinstance(mem, (int, float)) else None, "{:.2f} GiB")
    return f"| {dtype} | {ms:.1f} | {number(tokens, '{:.0f}')} | {mfu_text} | {mem_text} | `{path}` |", True


def report(args):
    """(the report's text, the reasons the check failed: none when it passed)."""
    log, stop_time_passed = parse_ctest_log(args.ctest_log)
    tests = merge(parse_junit(args.junit), log, parse_test_list(args.test_list), stop_time_passed)
    by_status = {}
    for name, result in tests.items():
        by_status.setdefault(result.status, []).append((name, result))
    count = {s: len(by_status.get(s, [])) for s in (PASSED, FAILED, TIMED_OUT, NOT_RUN, SKIPPED)}

    lines = ["# GPU check", ""]
    lines += [f"- {name}: {value}" for name, _, value in (fact.partition("=") for fact in args.fact) if value]
    lines += [f"- {lang} compiler: {compiler}" for lang, compiler in read_compilers(args.cache).items()]
    lines += ["", "## CUDA tests", "",
              f"CUDA tests: {count[PASSED]} passed, {count[FAILED]} failed, {count[TIMED_OUT]} timed out, "
              f"{count[NOT_RUN]} not run, {count[SKIPPED]} skipped, of {len(tests)}"]
    for status, title in ((FAILED, "Failed"), (TIMED_OUT, "Timed out (stopped at their limit or the deadline)"),
                          (NOT_RUN, "Not run"), (SKIPPED, "Skipped")):
        if by_status.get(status):
            lines += ["", f"{title}:", ""]
            lines += [f"- `{name}`" + (f": {r.detail}" if r.detail else "") for name, r in by_status[status]]

    failed_benches = []
    if args.bench:
        lines += ["", "## GPT-2 training step", "", args.bench_title or "gpt2_step_bench:", "",
                  "| dtype | ms/step (median) | tokens/s | MFU | peak memory | result |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for item in args.bench:
            dtype, _, path = item.partition("=")
            row, ok = bench_row(dtype, path)
            lines.append(row)
            if not ok:
                failed_benches.append(dtype)

    problems = [f"{count[s]} {s}" for s in (FAILED, TIMED_OUT, NOT_RUN) if count[s]]
    if count[PASSED] == 0:
        problems.append("no CUDA test passed")
    elif count[SKIPPED] > count[PASSED]:
        # A few tests skip for good reasons (a second GPU); most of them skipping means the CUDA runtime does
        # not see the GPU that nvidia-smi lists.
        problems.append("more CUDA tests skipped than passed: the CUDA runtime does not see the GPU")
    problems += [f"the {dtype} benchmark failed" for dtype in failed_benches]
    lines += ["", "Result: " + ("FAILED: " + "; ".join(problems) if problems else "OK")]
    return "\n".join(lines) + "\n", problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--junit", help="ctest --output-junit FILE")
    parser.add_argument("--ctest-log", help="ctest's console output")
    parser.add_argument("--test-list", help="ctest --show-only=json-v1 output: the tests that should have run")
    parser.add_argument("--cache", help="the build's CMakeCache.txt")
    parser.add_argument("--fact", action="append", default=[], help="NAME=VALUE, a line of the machine's list")
    parser.add_argument("--bench", action="append", default=[], help="DTYPE=FILE, a gpt2_step_bench --json result")
    parser.add_argument("--bench-title", default="")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    try:
        text, problems = report(args)
        Path(args.out).write_text(text)
    except Exception:  # a report that cannot be written is the check's failure to run, not a failed test
        traceback.print_exc()
        return 2
    sys.stdout.write(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
