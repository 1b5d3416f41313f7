#!/usr/bin/env python3
"""Says how many CUDA tests ran in a CTest run, and fails when any was skipped or none ran.

    scripts/cuda_tests_ran.py BUILD_DIR JUNIT_XML

BUILD_DIR's tests labelled "cuda" (ctest --show-only=json-v1) are looked up in the JUnit report that
`ctest --output-junit JUNIT_XML` wrote. In the emulation build every CUDA test must run: a skip there means
a test found no GPU where there is one, which would let CUDA code go untested while CI stays green.
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET


def cuda_tests(build_dir):
    listing = subprocess.run(["ctest", "--test-dir", build_dir, "-N", "--show-only=json-v1"], check=True,
                             capture_output=True, text=True).stdout
    names = set()
    for test in json.loads(listing)["tests"]:
        for prop in test.get("properties", []):
            if prop["name"] == "LABELS" and "cuda" in prop["value"]:
                names.add(test["name"])
    return names


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    build_dir, junit = sys.argv[1], sys.argv[2]
    wanted = cuda_tests(build_dir)
    status = {case.get("name"): case.get("status") for case in ET.parse(junit).getroot().iter("testcase")}
    ran = [n for n in wanted if status.get(n) in ("run", "fail")]
    skipped = sorted(n for n in wanted if status.get(n) == "notrun")
    missing = sorted(n for n in wanted if n not in status)
    failed = sum(1 for n in wanted if status.get(n) == "fail")
    print(f"cuda tests: {len(wanted)} labelled, {len(ran)} ran ({failed} failed), {len(skipped)} skipped, "
          f"{len(missing)} not in the report")
    for name in skipped:
        print(f"  skipped: {name}")
    for name in missing:
        print(f"  not run: {name}")
    if not wanted or skipped or missing:
        sys.exit(1)


if __name__ == "__main__":
    main()
