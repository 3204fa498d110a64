"""File-system fuzzing: the files *around* a valid model are mutated, not its bytes.

Each case puts one kind of file-system object (FIFO, device, symlink to a regular file / to a
device / dangling / looping, hard link, sparse file, directory, empty file) in one slot a
command reads (a source model, a .caffemodel, a dialect model, its external-data file), under
one spelling of the path (absolute, relative, with ``./`` and ``..``), and runs the command
line in-process. Expected: exit 0 where the object is a regular file in disguise (a link to
the real file, a big sparse weights file), otherwise exit 2 with one ``Error:`` line; never a
traceback or hang, no temp file left, no file of the case modified.

Run as a script (test_fuzz_fs.py does, in a child under RLIMIT_AS):
    python fuzz_fs.py CASES SEED [--only N]
prints one JSON object: outcome counts and every failure with its case number.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))  # run as a script: tests.*

from rel_fs import dialect_bytes, external_dialect, weights_file
from rel_models import write_source

from tests.cli_runner import run_cli

CASE_SECONDS = 10  # every case takes well under a second; more is a hang

# slot -> (the file the slot names, relative to the case folder)
SLOTS = {
    "onnx source": "src/model.onnx",
    "tf source": "src/model.pb",
    "prototxt": "src/deploy.prototxt",
    "caffemodel": "src/weights.caffemodel",
    "check model": "dialect/model.onnx",
    "info model": "dialect/model.onnx",
    "run model": "dialect/model.onnx",
    "check external data": "ext/w.bin",
    "run external data": "ext/w.bin",
}
# kind -> expected exit code (0: a regular file in disguise)
KINDS = {
    "fifo": 2, "/dev/zero": 2, "/dev/null": 2, "symlink to /dev/zero": 2,
    "symlink to /dev/null": 2, "dangling symlink": 2, "symlink loop": 2, "directory": 2,
    "empty file": 2, "sparse zeros (4 KiB)": 2, "sparse 3 GiB": 2,
    "symlink to the real file": 0, "hard link to the real file": 0,
}
# -o targets that are not regular files: refused with exit 1, left as
# they were. (Never /dev/null itself: as root, a regression would replace the machine's.)
OUTPUT_KINDS = ("fifo", "symlink to a fifo", "symlink to /dev/null", "directory")
SPELLINGS = ["absolute", "relative", "dotted"]
# only the declared span of an external-data file is read: zeros are valid weights
EXTERNAL_OK = {"sparse 3 GiB", "sparse zeros (4 KiB)"}
DEVICES = ("/dev/zero", "/dev/null")  # given as the path itself (external data: via a model)


@dataclass
class Case:
    number: int
    slot: str
    kind: str
    spelling: str

    @property
    def expected(self) -> int:
        if self.slot == "output":
            return 1
        if "external" in self.slot and self.kind in EXTERNAL_OK:
            return 0
        if self.slot == "prototxt" and self.kind == "empty file":
            return 1  # a readable, empty net: invalid (README bad-inputs table)
        return KINDS[self.kind]


def _pairs() -> list[tuple[str, str]]:
    return [(s, k) for s in SLOTS for k in KINDS if not ("external" in s and k in DEVICES)]


def all_cases() -> list[tuple[str, str, str]]:
    return [(s, k, p) for s, k in _pairs() for p in SPELLINGS]


def pick(count: int, seed: int, outputs: bool = False) -> list[Case]:
    """``count`` cases: every (slot, kind) pair once, then seeded picks of the product
    (with ``outputs``: the non-regular -o targets instead)."""
    rng = random.Random(seed)
    combos = [("output", k, p) for k in OUTPUT_KINDS for p in SPELLINGS] if outputs \
        else all_cases()
    base = [("output", k, rng.choice(SPELLINGS)) for k in OUTPUT_KINDS] if outputs \
        else [(s, k, rng.choice(SPELLINGS)) for s, k in _pairs()]
    chosen = base[:count] + [rng.choice(combos) for _ in range(max(0, count - len(base)))]
    return [Case(i, *c) for i, c in enumerate(chosen)]


def _build(folder: Path) -> None:
    write_source(folder / "src", "onnx")
    write_source(folder / "src", "tf")
    write_source(folder / "src", "caffe")
    (folder / "dialect").mkdir()
    (folder / "dialect" / "model.onnx").write_bytes(dialect_bytes())
    external_dialect(folder / "ext", "w.bin", data=weights_file())
    (folder / "out").mkdir()


def _plant(path: Path, kind: str) -> None:
    """Replace the file at ``path`` by an object of ``kind`` (keeping a copy as real.bin)."""
    real = path.with_name("real-" + path.name)
    os.replace(path, real)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind.startswith("symlink to /dev/"):
        path.symlink_to(kind.removeprefix("symlink to "))
    elif kind == "dangling symlink":
        path.symlink_to(path.with_name("gone"))
    elif kind == "symlink loop":
        path.symlink_to(path.with_name("loop"))
        path.with_name("loop").symlink_to(path.name)
    elif kind == "directory":
        path.mkdir()
    elif kind == "empty file":
        path.write_bytes(b"")
    elif kind.startswith("sparse"):
        with open(path, "wb") as f:
            f.truncate(4096 if "4 KiB" in kind else 3 << 30)
    elif kind == "symlink to the real file":
        path.symlink_to(real.name)
    elif kind == "hard link to the real file":
        os.link(real, path)
    else:
        raise ValueError(kind)


def _spell(path: Path, folder: Path, spelling: str) -> str:
    if spelling == "absolute":
        return str(path)
    rel = os.path.relpath(path, folder)
    if spelling == "relative":
        return rel
    parent = Path(rel).parts[0]
    return os.path.join(".", parent, "..", rel)


def _output_command(case: Case, folder: Path) -> list[str]:
    target = folder / "out" / "m.onnx"
    if case.kind == "fifo":
        os.mkfifo(target)
    elif case.kind == "symlink to a fifo":
        os.mkfifo(folder / "out" / "pipe")
        target.symlink_to("pipe")
    elif case.kind == "symlink to /dev/null":
        target.symlink_to("/dev/null")
    elif case.kind == "directory":
        target.mkdir()
    return ["convert", str(folder / "src" / "model.onnx"), "-o",
            _spell(target, folder, case.spelling)]


def _command(case: Case, folder: Path) -> list[str]:
    if case.slot == "output":
        return _output_command(case, folder)
    target = folder / SLOTS[case.slot]
    if case.kind in DEVICES:
        given = case.kind  # the device itself, not a link to it
    else:
        _plant(target, case.kind)
        given = _spell(target, folder, case.spelling)
    src = folder / "src"
    out = "out/m.onnx"
    if case.slot == "onnx source":
        return ["convert", given, "--framework", "onnx", "-o", out]
    if case.slot == "tf source":
        return ["convert", given, "--framework", "tf", "-o", out]
    if case.slot == "prototxt":
        return ["convert", given, "--framework", "caffe", "--weights",
                str(src / "weights.caffemodel"), "-o", out]
    if case.slot == "caffemodel":
        return ["convert", str(src / "deploy.prototxt"), "--weights", given, "-o", out]
    if case.slot in ("check model", "info model"):
        return [case.slot.split()[0], given]
    if case.slot == "run model":
        return ["run", given, "--random", "--output-dir", "out/run"]
    model = "ext/model.onnx"
    if case.slot == "check external data":
        return ["check", model]
    return ["run", model, "--random", "--output-dir", "out/run"]


def _snapshot(folder: Path, skip_out: bool = True) -> dict[str, str]:
    """Every entry (outside out/ unless told): its type, and the hash of regular files (links
    not followed)."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            rel = str(p.relative_to(folder))
            if skip_out and (rel == "out" or rel.startswith("out" + os.sep)):
                continue
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_blocks * 512 >= st.st_size:
                found[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:  # sparse files: size and type only (reading 3 GiB of holes is slow)
                found[rel] = f"{stat.S_IFMT(st.st_mode)}:{st.st_size}"
    return found


class CaseTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise CaseTimeout()


def run_case(case: Case, work: Path) -> dict | None:
    """None when the case behaved, else a description of what went wrong."""
    folder = work / f"case{case.number}"
    _build(folder)
    args = _command(case, folder)
    outputs = case.slot == "output"
    before = _snapshot(folder, skip_out=not outputs)
    cwd = os.getcwd()
    os.chdir(folder)
    signal.alarm(CASE_SECONDS)
    try:
        result = run_cli(*args)
    except CaseTimeout:
        return {"problem": "hang", "args": args}
    finally:
        signal.alarm(0)
        os.chdir(cwd)
    err = result.stderr.strip()
    problems = []
    if case.slot == "output" and result.exit_code in (1, 2):
        pass  # refused (an OutputPathError, or a usage error for a directory)
    elif result.exit_code != case.expected:
        problems.append(f"exit {result.exit_code}, expected {case.expected}")
    if "Traceback" in result.output + result.stderr or "internal error" in err:
        problems.append("traceback or internal error")
    error_lines = [ln for ln in err.splitlines() if ln.startswith("Error:")]
    if case.expected and (len(error_lines) != 1 or error_lines[0] != err.splitlines()[-1]):
        problems.append(f"not one Error: line: {err[-200:]!r}")
    if _snapshot(folder, skip_out=not outputs) != before:
        problems.append("a file of the case changed")
    left = [] if outputs else sorted(str(p.relative_to(folder / "out"))
                                     for p in (folder / "out").rglob("*"))
    allowed = {"m.onnx"} if case.expected == 0 and args[0] == "convert" else set()
    if case.expected == 0 and args[0] == "run":
        allowed = {p for p in left if p.startswith("run")}
    if set(left) - allowed or (allowed == {"m.onnx"} and "m.onnx" not in left):
        problems.append(f"out/ holds {left}")
    shutil.rmtree(folder, ignore_errors=True)
    if problems:
        return {"problem": "; ".join(problems), "args": args, "stderr": err[-300:],
                "exit": result.exit_code}
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", type=int)
    parser.add_argument("seed", type=int)
    parser.add_argument("--only", type=int)
    parser.add_argument("--outputs", action="store_true", help="non-regular -o targets")
    a = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    dialect_bytes()  # convert the fixture once, outside the timed cases
    cases = pick(a.cases, a.seed, a.outputs)
    if a.only is not None:
        cases = [cases[a.only]]
    started = time.perf_counter()
    failures, outcomes = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            failure = run_case(case, Path(tmp))
            key = "failed" if failure else f"exit {case.expected}"
            outcomes[key] = outcomes.get(key, 0) + 1
            if failure:
                failures.append({"case": case.number, "slot": case.slot, "kind": case.kind,
                                 "spelling": case.spelling, **failure})
    print(json.dumps({"cases": len(cases), "outcomes": outcomes, "failures": failures,
                      "seconds": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main()
