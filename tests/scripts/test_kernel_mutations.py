"""tools/kernel_mutations/kernel_mutations.py's list still fits the code: each mutation names a file that exists, and
each text it replaces occurs exactly once there (the tool refuses to run otherwise, but only after a build of its
own, tens of minutes later). Names are unique, and a mutation's seed, where it has one, is a positive integer.
"""
import importlib.util
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("kernel_mutations",
                                              ROOT / "tools" / "kernel_mutations" / "kernel_mutations.py")
kernel_mutations = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(kernel_mutations)


class KernelMutations(unittest.TestCase):
    def test_every_mutation_applies_once(self):
        mutations = kernel_mutations.MUTATIONS
        self.assertGreater(len(mutations), 0)
        self.assertEqual(len({m.name for m in mutations}), len(mutations), "mutation names must be unique")
        for m in mutations:
            with self.subTest(mutation=m.name):
                path = ROOT / m.path
                self.assertTrue(path.is_file(), f"{m.path} does not exist")
                text = path.read_text()
                self.assertGreater(len(m.edits), 0)
                for old, new in m.edits:
                    self.assertEqual(text.count(old), 1, f"{old!r} should occur once in {m.path}")
                    self.assertNotEqual(old, new)
                    text = text.replace(old, new)
                self.assertTrue(m.seed is None or (isinstance(m.seed, int) and m.seed > 0))


if __name__ == "__main__":
    unittest.main()
