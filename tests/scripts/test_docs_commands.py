"""scripts/docs_commands.py: what it reads as a command, how its comments adapt a block, and its checks."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import docs_commands  # noqa: E402


def blocks_of(text):
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
        f.write(text)
    try:
        return docs_commands.blocks_of(f.name)
    finally:
        os.unlink(f.name)


class Extraction(unittest.TestCase):
    def test_sh_blocks_join_continuations_and_drop_comments(self):
        [block] = blocks_of("text\n\n```sh\n# a comment line\nbuild/bin/a --x 1   # what it does\n"
                            "build/bin/b --y \\\n    --z 'q # not a comment'\n\n```\n")
        self.assertEqual(block.commands, ["build/bin/a --x 1", "build/bin/b --y --z 'q # not a comment'"])
        self.assertEqual(block.line, 3)

    def test_transcripts_give_their_dollar_lines_only(self):
        [block] = blocks_of("```\n$ prog --a \\\n      --b\noutput line\n$ other\nmore output\n```\n")
        self.assertEqual(block.commands, ["prog --a --b", "other"])

    def test_other_blocks_hold_no_commands(self):
        self.assertEqual(blocks_of("```cpp\nint main() {}\n```\n```json\n{}\n```\n```\nplain output\n```\n"), [])

    def test_a_comment_before_a_block_adapts_it(self):
        [block] = blocks_of("<!-- docs-test: sub --steps 300 => --steps 2 ; append --quick ; setup touch a.txt -->\n"
                            "```sh\nbuild/bin/prog --steps 300\ncmake --build build --target prog\n```\n")
        self.assertEqual(block.setups, ["touch a.txt"])
        # append reaches the commands that run a program of the build, not cmake's
        self.assertEqual(block.runnable({"prog"}), ["build/bin/prog --steps 2 --quick",
                                                    "cmake --build build --target prog"])

    def test_skip_and_mistakes_in_the_comment(self):
        [block] = blocks_of("<!-- docs-test: skip needs a GPU -->\n```sh\nrun-it\n```\n")
        self.assertEqual(block.skip, "needs a GPU")
        with self.assertRaises(SystemExit):  # a sub that matches nothing is a stale comment
            blocks_of("<!-- docs-test: sub --nope => --x -->\n```sh\nrun-it\n```\n")
        with self.assertRaises(SystemExit):
            blocks_of("<!-- docs-test: frobnicate -->\n```sh\nrun-it\n```\n")


class ProgramsAreBuilt(unittest.TestCase):
    def test_a_program_must_be_built_by_train_sh_or_by_the_file(self):
        built_by_train = docs_commands.train_sh_targets()
        self.assertIn("gpt2_train", built_by_train)
        programs = {"gpt2_train", "ch07_memory_bench", "ch08_dist_bench"}
        unbuilt = blocks_of("```sh\nbuild/bin/gpt2_train\nmpirun -np 2 ch07_memory_bench --model d12\n```\n")
        problems = docs_commands.check_programs_are_built({"X.md": unbuilt}, programs)
        self.assertEqual(len(problems), 1)
        self.assertIn("ch07_memory_bench is not built", problems[0])
        built = blocks_of("```sh\ncmake --build build --target ch07_memory_bench\n"
                          "mpirun -np 2 ch07_memory_bench --model d12\n```\n")
        self.assertEqual(docs_commands.check_programs_are_built({"X.md": built}, programs), [])


if __name__ == "__main__":
    unittest.main()
