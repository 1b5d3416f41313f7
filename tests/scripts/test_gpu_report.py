"""scripts/gpu_report.py on the files ctest and gpt2_step_bench write: every test that failed, timed out, did not
run or skipped, by name (skips with the test's reason), the compilers, the step-benchmark rows and the verdict.

The JUnit files and the log are what ctest wrote for GoogleTest tests registered as the project registers them
(gtest_discover_tests, a TIMEOUT of their own), run with --timeout and --stop-time: CMake 3.25's, and CMake 4's
(which names the failure: "Timeout"). Trimmed, with the structure and attributes as written.
"""
import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_report.py"

GTEST_FAILED = """Running main() from ./googletest/src/gtest_main.cc
Note: Google Test filter = CudaOps.Bad
[ RUN      ] CudaOps.Bad
/src/tests/common/cuda/test_ops.cpp:5: Failure
relative max error 3.7e-06
[  FAILED  ] CudaOps.Bad (0 ms)
"""
GTEST_SKIPPED = """Running main() from ./googletest/src/gtest_main.cc
Note: Google Test filter = CudaPeer.CopyBetweenDevices
[ RUN      ] CudaPeer.CopyBetweenDevices
/src/tests/common/cuda/test_runtime.cpp:40: Skipped
needs 2 GPUs, 1 visible
[  SKIPPED ] CudaPeer.CopyBetweenDevices (0 ms)
"""
# An MPI job (lab_add_mpi_gtest): rank 0's GoogleTest output, two tests skipped for the same reason, exit 77.
MPI_SKIPPED = """[ RUN      ] Nccl.AllReduce
/src/tests/common/comm/test_nccl_comm.cpp:12: Skipped
needs a GPU per rank (NCCL refuses two ranks on one GPU): 2 ranks, 1 GPU visible
[  SKIPPED ] Nccl.AllReduce (1 ms)
[ RUN      ] Nccl.Broadcast
/src/tests/common/comm/test_nccl_comm.cpp:30: Skipped
needs a GPU per rank (NCCL refuses two ranks on one GPU): 2 ranks, 1 GPU visible
[  SKIPPED ] Nccl.Broadcast (0 ms)
"""

JUNIT_CMAKE_3_25 = f"""<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)"
\ttests="6"
\tfailures="2"
\tdisabled="0"
\tskipped="3"
\thostname=""
\ttime="75"
\ttimestamp="2026-11-25T01:23:06"
\t>
\t<testcase name="CudaOps.Good" classname="CudaOps.Good" time="0.00531481" status="run">
\t\t<system-out>[       OK ] CudaOps.Good (0 ms)
</system-out>
\t</testcase>
\t<testcase name="CudaOps.Bad" classname="CudaOps.Bad" time="0.00581609" status="fail">
\t\t<failure message=""/>
\t\t<system-out>{GTEST_FAILED}</system-out>
\t</testcase>
\t<testcase name="CudaPeer.CopyBetweenDevices" classname="CudaPeer.CopyBetweenDevices" time="0.004" status="notrun">
\t\t<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
\t\t<system-out>{GTEST_SKIPPED}</system-out>
\t</testcase>
\t<testcase name="CudaStream.Hangs" classname="CudaStream.Hangs" time="74.75" status="fail">
\t\t<failure message=""/>
\t\t<system-out>[ RUN      ] CudaStream.Hangs
</system-out>
\t</testcase>
\t<testcase name="test_nccl_comm.np2" classname="test_nccl_comm.np2" time="1.2" status="notrun">
\t\t<skipped message="SKIP_RETURN_CODE=77"/>
\t\t<system-out>{MPI_SKIPPED}</system-out>
\t</testcase>
\t<testcase name="test_trainer_cuda_missing" classname="test_trainer_cuda_missing" time="0" status="notrun">
\t\t<skipped message="Unable to find executable"/>
\t\t<system-out>Unable to find executable: /build/bin/test_trainer_cuda</system-out>
\t</testcase>
</testsuite>
"""
LOG_CMAKE_3_25 = """Test project /build
    Start 1: CudaOps.Good
1/6 Test #1: CudaOps.Good .....................   Passed    0.01 sec
2/6 Test #2: CudaOps.Bad ......................***Failed    0.01 sec
/src/tests/common/cuda/test_ops.cpp:5: Failure
3/6 Test #3: CudaPeer.CopyBetweenDevices ......***Skipped   0.00 sec
4/6 Test #5: test_nccl_comm.np2 ...............***Skipped   1.20 sec
Unable to find executable: /build/bin/test_trainer_cuda
5/6 Test #6: test_trainer_cuda_missing ........***Not Run   0.00 sec
6/6 Test #4: CudaStream.Hangs .................***Timeout  74.75 sec
The stop time has been passed. Stopping all tests.

50% tests passed, 3 tests failed out of 6
"""
# ctest --show-only=json-v1: CudaOps.Late was still waiting for a slot when the deadline passed.
TEST_LIST = {"kind": "ctestInfo", "version": {"major": 1, "minor": 0},
             "tests": [{"name": n} for n in ("CudaOps.Good", "CudaOps.Bad", "CudaPeer.CopyBetweenDevices",
                                             "CudaStream.Hangs", "test_nccl_comm.np2", "test_trainer_cuda_missing",
                                             "CudaOps.Late")]}

JUNIT_CMAKE_4 = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)"
\ttests="3" failures="2" disabled="0" skipped="0" hostname="" time="120" timestamp="2026-11-25T01:23:06"
\t>
\t<testcase name="CudaOps.Good" classname="CudaOps.Good" time="0.01" status="run">
\t\t<properties>
\t\t\t<property name="cmake_labels" value="cuda"/>
\t\t</properties>
\t\t<system-out></system-out>
\t</testcase>
\t<testcase name="CudaStream.Hangs" classname="CudaStream.Hangs" time="120" status="fail">
\t\t<failure message="Timeout"/>
\t\t<properties>
\t\t\t<property name="cmake_labels" value="cuda"/>
\t\t</properties>
\t\t<system-out></system-out>
\t</testcase>
\t<testcase name="CudaOps.Crash" classname="CudaOps.Crash" time="0.2" status="fail">
\t\t<failure message="SEGFAULT"/>
\t\t<properties/>
\t\t<system-out></system-out>
\t</testcase>
</testsuite>
"""

CACHE = """# This is the CMakeCache file.
CMAKE_CXX_COMPILER:FILEPATH=/usr/bin/g++-13
CMAKE_CUDA_COMPILER:FILEPATH=/usr/local/cuda/bin/nvcc
"""
# CMake keeps the compilers' identification beside the cache, not in it.
CXX_IDENTIFIED = 'set(CMAKE_CXX_COMPILER "/usr/bin/g++-13")\nset(CMAKE_CXX_COMPILER_ID "GNU")\n' \
                 'set(CMAKE_CXX_COMPILER_VERSION "13.3.0")\n'
CUDA_IDENTIFIED = 'set(CMAKE_CUDA_COMPILER_ID "NVIDIA")\nset(CMAKE_CUDA_COMPILER_VERSION "13.0.88")\n'

# gpt2_step_bench --json: one row per run (other keys left out).
BENCH = {"bench": "gpt2_step", "rows": [{"dtype": "bf16", "ms_median": 81.2, "tokens_per_s": 100882.0, "mfu": 0.137,
                                          "peak_name": "H100 SXM bf16 989.4 TFLOP/s", "mem_peak_bytes": 15.0e9}]}
BENCH_UNKNOWN_GPU = {"bench": "gpt2_step", "rows": [{"dtype": "fp32", "ms_median": 190.3, "tokens_per_s": 43047.0,
                                                     "mfu": None, "peak_name": None, "mem_peak_bytes": 13.8e9}]}


class GpuReport(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.dir)

    def write(self, name, text):
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if isinstance(text, str) else json.dumps(text))
        return str(path)

    def run_report(self, *args, out="report.md"):
        """(the report, the exit status); the report printed is the report written."""
        done = subprocess.run([sys.executable, str(SCRIPT), *args, "--out", str(self.dir / out)],
                              capture_output=True, text=True)
        if done.returncode in (0, 1):
            self.assertEqual(done.stdout, (self.dir / out).read_text())
        return done.stdout, done.returncode

    def section(self, text, title):
        """The list under a title of the report: from "Title:" to the next blank line after it."""
        return text.split(f"\n{title}")[1].split("\n\n")[1]

    def test_every_test_that_did_not_pass_is_named_with_why(self):
        text, status = self.run_report("--junit", self.write("junit.xml", JUNIT_CMAKE_3_25),
                                        "--ctest-log", self.write("ctest.log", LOG_CMAKE_3_25),
                                        "--test-list", self.write("tests.json", TEST_LIST))
        self.assertIn("CUDA tests: 1 passed, 1 failed, 1 timed out, 2 not run, 2 skipped, of 7", text)
        self.assertEqual(self.section(text, "Failed:"), "- `CudaOps.Bad`")
        # CMake 3.25's JUnit writes a timeout as a plain failure; the log tells it apart.
        self.assertEqual(self.section(text, "Timed out"), "- `CudaStream.Hangs`")
        self.assertEqual(self.section(text, "Not run:"),
                         "- `CudaOps.Late`: never started: the test phase's deadline passed first\n"
                         "- `test_trainer_cuda_missing`: Unable to find executable")
        self.assertEqual(self.section(text, "Skipped:"),
                         "- `CudaPeer.CopyBetweenDevices`: needs 2 GPUs, 1 visible\n"
                         "- `test_nccl_comm.np2`: needs a GPU per rank (NCCL refuses two ranks on one GPU): "
                         "2 ranks, 1 GPU visible")
        self.assertNotIn("`CudaOps.Good`", text)
        self.assertIn("\nResult: FAILED: 1 failed; 1 timed out; 2 not run; more CUDA tests skipped than passed", text)
        self.assertEqual(status, 1)

    def test_cmake_4_junit_names_timeouts_and_crashes_itself(self):
        text, status = self.run_report("--junit", self.write("junit.xml", JUNIT_CMAKE_4))
        self.assertIn("CUDA tests: 1 passed, 1 failed, 1 timed out, 0 not run, 0 skipped, of 3", text)
        self.assertEqual(self.section(text, "Failed:"), "- `CudaOps.Crash`: SEGFAULT")
        self.assertEqual(self.section(text, "Timed out"), "- `CudaStream.Hangs`")
        self.assertEqual(status, 1)

    def test_the_log_alone_still_names_the_tests(self):
        # No JUnit file (ctest stopped before writing it): the log's progress lines are enough.
        text, status = self.run_report("--ctest-log", self.write("ctest.log", LOG_CMAKE_3_25),
                                       "--junit", str(self.dir / "absent.xml"))
        self.assertIn("CUDA tests: 1 passed, 1 failed, 1 timed out, 1 not run, 2 skipped, of 6", text)
        self.assertEqual(self.section(text, "Timed out"), "- `CudaStream.Hangs`")
        self.assertEqual(status, 1)

    def test_machine_compilers_and_bench_rows(self):
        self.write("CMakeFiles/3.25.1/CMakeCXXCompiler.cmake", CXX_IDENTIFIED)
        self.write("CMakeFiles/3.25.1/CMakeCUDACompiler.cmake", CUDA_IDENTIFIED)
        text, status = self.run_report(
            "--junit", self.write("junit.xml", JUNIT_CMAKE_4), "--cache", self.write("CMakeCache.txt", CACHE),
            "--fact", "GPU=1 x NVIDIA H100 80GB HBM3 (compute capability 9.0, built for sm_90)",
            "--fact", "driver=580.159; CUDA toolkit 13.0", "--fact", "empty=",
            "--bench", f"fp32={self.write('fp32.json', BENCH_UNKNOWN_GPU)}",
            "--bench", f"bf16={self.write('bf16.json', BENCH)}",
            "--bench", f"tf32={self.dir / 'missing.json'}")
        self.assertIn("- GPU: 1 x NVIDIA H100 80GB HBM3 (compute capability 9.0, built for sm_90)\n", text)
        self.assertIn("- driver: 580.159; CUDA toolkit 13.0\n", text)
        self.assertNotIn("empty", text)
        self.assertIn("- C++ compiler: /usr/bin/g++-13 (GNU 13.3.0)\n", text)
        self.assertIn("- CUDA compiler: /usr/local/cuda/bin/nvcc (NVIDIA 13.0.88)\n", text)
        self.assertIn("| fp32 | 190.3 | 43047 | peak not known for this GPU | 12.85 GiB |", text)
        self.assertIn("| bf16 | 81.2 | 100882 | 13.7% of H100 SXM bf16 989.4 TFLOP/s | 13.97 GiB |", text)
        self.assertIn("| tf32 | failed (no result) |", text)
        self.assertTrue(text.rstrip().endswith("the tf32 benchmark failed"), text)
        self.assertEqual(status, 1)

    def test_a_clean_run_passes(self):
        junit = JUNIT_CMAKE_4.replace('status="fail"', 'status="run"').replace('<failure message="Timeout"/>', "") \
                             .replace('<failure message="SEGFAULT"/>', "")
        text, status = self.run_report("--junit", self.write("junit.xml", junit),
                                       "--bench", f"bf16={self.write('bf16.json', BENCH)}")
        self.assertIn("CUDA tests: 3 passed, 0 failed, 0 timed out, 0 not run, 0 skipped, of 3", text)
        self.assertTrue(text.endswith("\nResult: OK\n"), text)
        self.assertEqual(status, 0)

    def test_no_result_at_all_fails(self):
        text, status = self.run_report("--test-list", self.write("tests.json", TEST_LIST))
        self.assertIn("0 passed, 0 failed, 0 timed out, 7 not run", text)
        self.assertIn("- `CudaOps.Good`: no result from ctest", text)
        self.assertEqual(status, 1)

    def test_a_report_that_cannot_be_written_is_status_2(self):
        _, status = self.run_report("--junit", self.write("junit.xml", JUNIT_CMAKE_4), out="no/such/dir/report.md")
        self.assertEqual(status, 2)


if __name__ == "__main__":
    unittest.main()
