#!/usr/bin/env python3
"""Runs the shell commands the project's Markdown files give, at a tiny size, so that a documented command that
stops working fails CI.

    python3 scripts/docs_commands.py --build build            # run them all (the docs test of ctest)
    python3 scripts/docs_commands.py --build build --list     # what would run, after substitutions
    python3 scripts/docs_commands.py --build build --only ch05_data/README.md

What counts as a command: every line of a fenced block labelled `sh` (a `\\` at the end continues the line;
comments and blank lines are dropped), and every line starting with `$ ` in an unlabelled fenced block (a
transcript: the lines without `$ ` are its output). Commands run in the order of each file, every file's in
one scratch directory of its own, with `build/` linked to the build directory, `build/bin` on the PATH (the
chapter READMEs name programs by their bare names too), `data/` holding links to the bundled data, and links to
the source tree's other top-level entries. A command that exits non-zero fails the test. Files run side by side,
--jobs at a time (default: the machine's cores), each file's report printed whole, in file order; the commands
that build (cmake, scripts/lab.sh, scripts/train.sh) run one at a time, as two builds of one folder must not.

A comment on the line just before a block adapts the block to a test run (it is invisible on a rendered page):

    <!-- docs-test: sub --model d12 => --model tiny ; sub --steps 300 => --steps 2 ; setup echo hi > a.txt -->
    <!-- docs-test: skip needs a GPU -->

    sub OLD => NEW   in every command of the block, replace the text OLD by NEW (a smaller size)
    append FLAGS     append FLAGS to every command of the block that runs a program of the build
    setup CMD        run CMD before the block (to create the files its commands read)
    skip REASON      do not run the block; REASON is printed

Two checks need no run: every program of the build a command runs (as build/bin/PROGRAM or by its bare name) is
built by scripts/train.sh, or the same file shows the `cmake --build build --target ...` command that builds it; and after the run no file of the source tree
has changed (a documented command must not write into the checkout). Exit status: 0 when every command ran and
both checks passed, 1 otherwise.
"""
import argparse
import concurrent.futures
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRECTIVE = re.compile(r"^<!--\s*docs-test:(.*?)-->\s*$")
TIMEOUT_S = 600
# Commands that may build: they take turns, since two builds of one folder at once race on its files.
BUILDS = re.compile(r"(^|[\s/])(cmake|lab\.sh|train\.sh)\s")
BUILD_LOCK = threading.Lock()


class Block:
    def __init__(self, path, line, commands, directive):
        self.path, self.line, self.commands = path, line, commands
        self.subs, self.appends, self.setups, self.skip = [], [], [], None
        for item in (i.strip() for i in directive.split(" ; ") if i.strip()):
            word, _, rest = item.partition(" ")
            if word == "sub" and " => " in rest:
                self.subs.append(tuple(rest.split(" => ", 1)))
            elif word == "append":
                self.appends.append(rest)
            elif word == "setup":
                self.setups.append(rest)
            elif word == "skip" and rest:
                self.skip = rest
            else:
                raise SystemExit(f"{path}:{line}: docs-test: cannot read '{item}' (sub A => B, append, setup, skip)")
        for old, _ in self.subs:
            if not any(old in c for c in commands):
                raise SystemExit(f"{path}:{line}: docs-test: 'sub {old}' matches no command of the block")

    def runnable(self, programs):
        """The block's commands as the test runs them (`append` goes to those that run a program of the build)."""
        out = []
        for command in self.commands:
            for old, new in self.subs:
                command = command.replace(old, new)
            runs_program = not command.startswith("cmake ") and bool(programs_in(command, programs))
            out.append(" ".join([command] + (self.appends if runs_program else [])))
        return out


def programs_in(command, programs):
    """The programs of the build that a command names, as build/bin/PROGRAM or by their bare names, in order."""
    return [w for w in re.findall(r"(?:^|[\s/])([\w-]+)", command) if w in programs]


def strip_comment(line):
    """A command line without its trailing `# comment` (a `#` outside quotes, after a space)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def blocks_of(path):
    """The fenced blocks of a Markdown file that hold commands."""
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        lang, start = fence.group(2), i
        directive = DIRECTIVE.match(lines[i - 1].strip()) if i > 0 else None
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i].strip())
            i += 1
        i += 1
        commands = []
        if lang in ("sh", "bash"):
            logical = ""
            for line in body:
                if not logical and (not line or line.startswith("#")):
                    continue
                logical += line
                if logical.endswith("\\"):
                    logical = logical[:-1].rstrip() + " "
                    continue
                commands.append(strip_comment(logical))
                logical = ""
        elif lang == "":
            j = 0
            while j < len(body):
                if body[j].startswith("$ "):
                    logical = body[j][2:]
                    while logical.endswith("\\") and j + 1 < len(body):
                        j += 1
                        logical = logical[:-1].rstrip() + " " + body[j]
                    commands.append(strip_comment(logical))
                j += 1
        if commands:
            blocks.append(Block(path, start + 1, [c for c in commands if c], directive.group(1) if directive else ""))
        elif directive:
            raise SystemExit(f"{path}:{start + 1}: docs-test comment before a block without commands")
    return blocks


def markdown_files():
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return sorted(listed.stdout.split())
    found = []
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d != "node_modules"]
        found += [os.path.relpath(os.path.join(top, f), ROOT) for f in files if f.endswith(".md")]
    return sorted(found)


def train_sh_targets():
    script = open(os.path.join(ROOT, "scripts", "train.sh"), encoding="utf-8").read()
    m = re.search(r"--target ([^\n]+)", script)
    return set(m.group(1).split()) if m else set()


def check_programs_are_built(blocks_by_file, programs):
    """Every program of the build (a file of build/bin) that a file's commands run, as build/bin/PROGRAM or by its
    bare name, is built by scripts/train.sh or by a `cmake --build build --target` command of the same file."""
    problems, by_train = [], train_sh_targets()
    for path, blocks in blocks_by_file.items():
        built_here = set()
        for c in (c for b in blocks for c in b.commands):
            m = re.search(r"cmake --build \S+ .*--target ((?:[\w-]+ ?)+)", c)
            if m:
                built_here.update(m.group(1).split())
        reported = set()
        for b in blocks:
            for c in b.commands:
                if c.startswith("cmake "):
                    continue
                for word in programs_in(c, programs):
                    if word not in by_train and word not in built_here and word not in reported:
                        reported.add(word)
                        problems.append(f"{path}:{b.line}: {word} is not built by scripts/train.sh, and {path} does "
                                        f"not show the `cmake --build build --target {word}` that builds it")
    return problems


def source_tree_state():
    """The checkout's changed and untracked files (git status), to compare before and after the run."""
    r = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                       text=True)
    return set(r.stdout.splitlines()) if r.returncode == 0 else None


def scratch_for(build, parent):
    """A directory that looks like the checkout to a command, where what it writes stays."""
    scratch = tempfile.mkdtemp(prefix="docs_", dir=parent)
    os.symlink(build, os.path.join(scratch, "build"))
    os.mkdir(os.path.join(scratch, "data"))
    for name in os.listdir(os.path.join(ROOT, "data")):
        if name != "cache":
            os.symlink(os.path.join(ROOT, "data", name), os.path.join(scratch, "data", name))
    for name in os.listdir(ROOT):
        if name not in ("data", ".git") and not name.startswith("build"):
            os.symlink(os.path.join(ROOT, name), os.path.join(scratch, name))
    return scratch


def run(command, cwd, env):
    start = time.monotonic()
    try:
        with BUILD_LOCK if BUILDS.search(command) else contextlib.nullcontext():
            p = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True,
                               text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout + p.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n(timed out after {TIMEOUT_S} s)", time.monotonic() - start


def run_file(path, blocks, programs, scratch, env):
    """Runs one file's blocks in order in its scratch directory; returns its report lines, its problems, and how
    many commands ran and were skipped."""
    lines, problems, ran, skipped = [], [], 0, 0
    for b in blocks:
        if b.skip:
            skipped += len(b.commands)
            lines.append(f"skip {path}:{b.line}: {b.skip}")
            continue
        for command in b.setups + b.runnable(programs):
            code, output, seconds = run(command, scratch, env)
            ran += 1
            lines.append(f"{'ok  ' if code == 0 else 'FAIL'} {path}:{b.line} ({seconds:.1f} s): {command}")
            if code != 0:
                tail = "\n".join(output.strip().split("\n")[-15:])
                problems.append(f"{path}:{b.line}: exit {code}: {command}\n    " + tail.replace("\n", "\n    "))
    return lines, problems, ran, skipped


def main():
    parser = argparse.ArgumentParser(description="Runs the commands of the project's Markdown files at a tiny size.")
    parser.add_argument("--build", required=True, help="the build directory whose build/bin the commands use")
    parser.add_argument("--list", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--only", help="only the Markdown files whose path contains this")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="files run side by side")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    if not os.path.isdir(os.path.join(build, "bin")):
        raise SystemExit(f"docs_commands.py: {build}/bin does not exist: build the project first")

    blocks_by_file = {}
    for path in markdown_files():
        if args.only and args.only not in path:
            continue
        blocks = blocks_of(path)
        if blocks:
            blocks_by_file[path] = blocks
    programs = set(os.listdir(os.path.join(build, "bin")))
    problems = check_programs_are_built(blocks_by_file, programs)

    if args.list:
        for path, blocks in blocks_by_file.items():
            for b in blocks:
                head = f"{path}:{b.line}"
                if b.skip:
                    print(f"{head}: skipped ({b.skip})")
                    continue
                for s in b.setups:
                    print(f"{head}: setup: {s}")
                for c in b.runnable(programs):
                    print(f"{head}: {c}")
        for p in problems:
            print(p)
        return 1 if problems else 0

    env = dict(os.environ)
    env["PATH"] = os.path.join(build, "bin") + os.pathsep + env.get("PATH", "")
    env.setdefault("OMP_WAIT_POLICY", "passive")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    parent = os.path.join(build, "docs_test")
    os.makedirs(parent, exist_ok=True)
    before = source_tree_state()
    ran = skipped = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        reports = [pool.submit(run_file, path, blocks, programs, scratch_for(build, parent), env)
                   for path, blocks in blocks_by_file.items()]
        for report in reports:
            lines, file_problems, file_ran, file_skipped = report.result()
            print("\n".join(lines), flush=True)
            problems += file_problems
            ran += file_ran
            skipped += file_skipped
    after = source_tree_state()
    if before is not None and after is not None and after != before:
        problems.append("the commands changed the source tree: " + ", ".join(sorted(after ^ before)))
    print(f"docs_commands: {ran} commands ran, {skipped} skipped, from {len(blocks_by_file)} files")
    for p in problems:
        print(f"docs_commands: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
