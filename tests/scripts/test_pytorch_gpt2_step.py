"""tools/compare/pytorch_gpt2_step.py, the PyTorch anchor of gpt2_step_bench, at a tiny size on the CPU (Debian's
PyTorch 1.13, eager): it trains (the loss falls over its steps), writes a bench result that bench_diff reads beside
gpt2_step_bench's own, with the same FLOP count per step; bad flags and a destination that is not a bench result
give one error line and exit status 1, leaving the file as it was. And scripts/gpu_bench.sh, which runs both side
by side, in its CPU smoke mode: one table row per batch size with every column filled.

The build directory (for gpt2_step_bench and bench_diff) comes from LAB_BUILD_DIR; PyTorch from Debian's
/usr/bin/python3 (python3-torch, installed by scripts/test.sh).
"""
import json
import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "compare" / "pytorch_gpt2_step.py"
PYTHON = "/usr/bin/python3"
BUILD = Path(os.environ.get("LAB_BUILD_DIR", ROOT / "build"))
TINY = ["--model", "tiny", "--device", "cpu", "--batch", "2", "--seq", "32", "--threads", "1"]


def has_torch():
    return subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


@unittest.skipUnless(Path(PYTHON).exists() and has_torch(), "no PyTorch for /usr/bin/python3 (apt-get install python3-torch)")
class PyTorchStep(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([PYTHON, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)

    def test_writes_a_result_that_bench_diff_compares_with_ours(self):
        with tempfile.TemporaryDirectory() as scratch:
            theirs, ours = Path(scratch) / "pytorch.json", Path(scratch) / "ours.json"
            run = self.run_script(*TINY, "--steps", "4", "--warmup", "1", "--json", str(theirs))
            self.assertEqual(run.returncode, 0, run.stderr)
            losses = [float(x) for x in re.findall(r"\(loss ([0-9.]+)\)", run.stdout)]
            self.assertEqual(len(losses), 4, run.stdout)
            self.assertLess(losses[-1], losses[0], "the steps must train")
            result = json.loads(theirs.read_text())
            self.assertEqual(result["bench"], "gpt2_step")
            row = result["rows"][0]
            self.assertEqual(next(iter(row)), "model")
            self.assertEqual((row["model"], row["batch"], row["seq"], row["kernels"]), ("tiny", 2, 32, "pytorch eager"))
            mine = subprocess.run([str(BUILD / "bin" / "gpt2_step_bench"), *TINY, "--steps", "2", "--warmup", "0",
                                   "--gemm-repeats", "1", "--json", str(ours)], capture_output=True, text=True)
            self.assertEqual(mine.returncode, 0, mine.stderr)
            our_row = json.loads(ours.read_text())["rows"][0]
            # The same model and the same formula: the same FLOPs per step.
            self.assertAlmostEqual(row["model_gflops_per_step"], our_row["model_gflops_per_step"], places=9)
            diff = subprocess.run([str(BUILD / "bin" / "bench_diff"), str(theirs), str(ours)], capture_output=True,
                                  text=True)
            self.assertEqual(diff.returncode, 0, diff.stderr)
            self.assertIn("pytorch eager", diff.stdout)
            self.assertIn("ms_median", diff.stdout)

    def test_bad_input_is_one_line_and_leaves_files_alone(self):
        with tempfile.TemporaryDirectory() as scratch:
            notes = Path(scratch) / "notes.json"
            notes.write_text("my notes\n")
            for args, expected in [(["--model", "d99"], "unknown model 'd99'"),
                                   (["--model", "tiny", "--seq", "65"], "exceeds the model's block size 64"),
                                   ([*TINY, "--dtype", "tf32"], "--dtype tf32 needs a GPU"),
                                   ([*TINY, "--json", str(notes)], "is not a bench result")]:
                run = self.run_script(*args)
                self.assertEqual(run.returncode, 1, args)
                self.assertEqual(run.stderr.count("\n"), 1, run.stderr)
                self.assertIn(expected, run.stderr)
            self.assertEqual(notes.read_text(), "my notes\n")

    def test_gpu_bench_script_tabulates_ours_beside_pytorch(self):
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "bench.md"
            run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_bench.sh"), "--skip-build", "--build-dir",
                                  str(BUILD), "--device", "cpu", "--model", "tiny", "--batches", "1 2", "--seq", "32",
                                  "--steps", "2", "--python", PYTHON, "--out", str(out)],
                                 capture_output=True, text=True, timeout=600)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            rows = [line for line in out.read_text().splitlines() if line.startswith("| ") and "---" not in line]
            self.assertEqual(rows[0], "| B | ours bf16 | ours all rungs | ours one-pass | ours + recompute | ours + ln "
                                      "| PyTorch eager |")
            self.assertEqual([r.split(" | ")[0] for r in rows[1:]], ["| 1", "| 2"])
            for row in rows[1:]:
                self.assertNotIn("failed", row)
                self.assertEqual(row.count(" ms, "), 6, row)
            self.assertEqual(len(list(Path(scratch).glob("gpu_bench_b*.json"))), 12)
            bad = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_bench.sh"), "--device", "cpu", "--steps", "0"],
                                 capture_output=True, text=True)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("positive integers", bad.stderr)


if __name__ == "__main__":
    unittest.main()
