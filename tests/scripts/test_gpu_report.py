"""scripts/gpu_report.py on the files ctest and gpt2_step_bench write: every failed, timed-out and skipped test by
name (skips with GoogleTest's reason), the host compiler, and the step-benchmark rows."""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_report.py"

# What ctest 3.25 writes with --output-junit for a passing, a failing, a timed-out and a skipped test.
JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="4" failures="2" disabled="0" skipped="1" hostname="" time="1">
  <testcase name="CudaOps.Good" classname="CudaOps.Good" time="0.1" status="run"><system-out></system-out></testcase>
  <testcase name="CudaOps.Bad" classname="CudaOps.Bad" time="0.1" status="fail">
    <failure message=""/><system-out>relative max error 3.7e-06</system-out></testcase>
  <testcase name="CudaStream.Hangs" classname="CudaStream.Hangs" time="120" status="fail">
    <failure message=""/><system-out></system-out></testcase>
  <testcase name="test_nccl_comm.np2" classname="test_nccl_comm.np2" time="1" status="notrun">
    <skipped message="SKIP_RETURN_CODE=77"/>
    <system-out>needs a GPU per rank (NCCL refuses two ranks on one GPU): 2 ranks on one node, 1 GPU visible: skipped
</system-out></testcase>
</testsuite>
"""
LOG = """1/4 Test #1: CudaOps.Good .............................   Passed    0.10 sec
2/4 Test #2: CudaOps.Bad ..............................***Failed    0.10 sec
3/4 Test #3: CudaStream.Hangs .........................***Timeout 120.00 sec
4/4 Test #4: test_nccl_comm.np2 .......................***Skipped   1.00 sec
"""
BENCH = {"bench": "gpt2_step", "rows": [{"dtype": "bf16", "ms_median": 81.2, "tokens_per_s": 100882.0, "mfu": 0.137,
                                          "peak_name": "H100 SXM bf16 dense", "mem_peak_bytes": 15.0e9}]}


class GpuReport(unittest.TestCase):
    def run_report(self, directory, extra=()):
        d = Path(directory)
        (d / "junit.xml").write_text(JUNIT)
        (d / "ctest.log").write_text(LOG)
        (d / "CMakeCache.txt").write_text("CMAKE_CXX_COMPILER:FILEPATH=/usr/bin/g++-13\n"
                                          "CMAKE_CXX_COMPILER_VERSION:STRING=13.3.0\n")
        (d / "bf16.json").write_text(json.dumps(BENCH))
        out = d / "report.md"
        subprocess.run([sys.executable, str(SCRIPT), "--junit", str(d / "junit.xml"), "--ctest-log", str(d / "ctest.log"),
                        "--cache", str(d / "CMakeCache.txt"), "--fact", "GPU=1 x NVIDIA H100 80GB HBM3",
                        "--bench", f"bf16={d / 'bf16.json'}", "--bench", f"fp32={d / 'missing.json'}",
                        "--out", str(out), *extra], check=True, capture_output=True, text=True)
        return out.read_text()

    def test_every_test_that_did_not_pass_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            text = self.run_report(d)
        self.assertIn("CUDA tests: 1 passed, 1 failed, 1 timed out, 1 skipped, of 4", text)
        failed = text.split("Failed:")[1].split("Timed out")[0]
        self.assertIn("`CudaOps.Bad`", failed)
        self.assertNotIn("CudaStream.Hangs", failed)  # a timeout is listed as such, not as a plain failure
        self.assertIn("`CudaStream.Hangs`", text.split("Timed out")[1].split("Skipped:")[0])
        self.assertIn("`test_nccl_comm.np2`: needs a GPU per rank", text.split("Skipped:")[1])
        self.assertNotIn("CudaOps.Good`", text)

    def test_machine_compiler_and_bench_rows(self):
        with tempfile.TemporaryDirectory() as d:
            text = self.run_report(d)
        self.assertIn("- GPU: 1 x NVIDIA H100 80GB HBM3", text)
        self.assertIn("- host compiler: /usr/bin/g++-13 (13.3.0)", text)
        self.assertIn("| bf16 | 81.2 | 100882 | 13.7% of H100 SXM bf16 dense | 13.97 GiB |", text)
        self.assertIn("| fp32 | failed (no result) |", text)

    def test_the_log_alone_still_names_the_tests(self):
        # Without a JUnit file (an older ctest), the log's progress lines are enough.
        with tempfile.TemporaryDirectory() as d:
            self.run_report(d)
            out = Path(d) / "log_only.md"
            subprocess.run([sys.executable, str(SCRIPT), "--ctest-log", str(Path(d) / "ctest.log"), "--out", str(out)],
                           check=True, capture_output=True, text=True)
            text = out.read_text()
        self.assertIn("CUDA tests: 1 passed, 1 failed, 1 timed out, 1 skipped, of 4", text)


if __name__ == "__main__":
    unittest.main()
