"""Run fuzz cases through ``nhwc_onnx.api.convert`` and classify what comes out.

Allowed outcomes: the model converts (and the output file is written), or a subclass of
NhwcOnnxError is raised (and nothing is written, no temp file is left). Anything else is a
crash: another exception, a case over its time limit, a leftover file, a missing output.

Run as a script (the tests do, in a child process under a memory limit):
    python fuzz_harness.py FORMAT CASES SEED [--only N] [--save DIR]
(FORMAT: onnx, onnx_ops, tf or caffe)
prints one JSON object: counts per outcome and every crash with its replay number.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import shutil
import signal
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from fuzz_cases import CaseFactory, FuzzCase

from nhwc_onnx.api import convert
from nhwc_onnx.errors import ConversionBugError, NhwcOnnxError

CASE_SECONDS = 10.0  # one tiny model never needs this long: more is a hang
CASE_MEGABYTES = 2560  # nor this much memory (a few-kB source with --weights random may
# legitimately build ~600 MB of weights and peak near 2 GB); the first case that pushes the peak
# past it is reported, and the child's RLIMIT_AS turns anything bigger into a MemoryError


class CaseTimeout(BaseException):
    """Raised by the alarm inside a case that runs too long."""


@dataclass
class Crash:
    case: int
    kind: str  # exception type, "timeout", "leftover", "no output"
    message: str
    where: str  # innermost nhwc_onnx frame: file:line in function
    steps: list[str]

    @property
    def signature(self) -> str:
        return f"{self.kind} at {self.where.split(':')[0]}:{self.where.split(' in ')[-1]}"


def _innermost_project_frame(tb) -> str:
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if "nhwc_onnx" in f.filename] or frames
    f = ours[-1]
    rel = f.filename[f.filename.find("nhwc_onnx"):] if "nhwc_onnx" in f.filename else f.filename
    return f"{rel}:{f.lineno} in {f.name}"


def _on_alarm(signum, frame):
    raise CaseTimeout()


def run_case(case: FuzzCase, fmt: str, work: Path) -> tuple[str, Crash | None]:
    """Convert one case in ``work``; (outcome label, crash or None)."""
    src_dir, out_dir = work / "src", work / "out"
    for d in (src_dir, out_dir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    for name, data in case.files.items():
        (src_dir / name).write_bytes(data)
    options = case.options
    if "weights.caffemodel" in case.files:
        options = options.replace(weights=str(src_dir / "weights.caffemodel"))
    output = out_dir / "out.onnx"
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        framework = "onnx" if fmt == "onnx_ops" else fmt
        convert(src_dir / case.source, output, options.replace(framework=framework))
        outcome = "converted"
    except NhwcOnnxError as exc:
        outcome = type(exc).__name__
        if isinstance(exc, ConversionBugError):  # allowed, but worth a report of its own
            lines = str(exc).splitlines()
            outcome = f"{outcome}: {' '.join(x.strip() for x in lines[:2])[:300]}"
    except CaseTimeout as exc:  # the alarm fires inside the running frame: it names the loop
        return "crash", Crash(-1, "timeout", f"over {CASE_SECONDS} s",
                              _innermost_project_frame(exc.__traceback__), case.steps)
    except Exception as exc:  # noqa: BLE001 - exactly what the fuzzer is looking for
        message = str(exc).splitlines()[0][:300] if str(exc) else ""
        return "crash", Crash(-1, type(exc).__name__, message,
                              _innermost_project_frame(exc.__traceback__), case.steps)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    left = {p.name for p in out_dir.iterdir()}
    if outcome == "converted":
        left -= {"out.onnx.data", "out.data"}  # large weights go to ONNX external data
    expected = {"out.onnx"} if outcome == "converted" else set()
    if left != expected:
        kind = "leftover" if left - expected else "no output"
        return "crash", Crash(-1, kind, f"after {outcome}: output folder holds {sorted(left)}",
                              "", case.steps)
    return outcome, None


def _peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def run_campaign(fmt: str, cases: int, seed: int, work: Path, only: int | None = None,
                 save: Path | None = None) -> dict:
    factory = CaseFactory(fmt, seed)
    counts: collections.Counter = collections.Counter()
    crashes: list[Crash] = []
    bugs: dict[str, int] = {}  # ConversionBugError message -> first case number
    old = signal.signal(signal.SIGALRM, _on_alarm)
    start = time.perf_counter()
    try:
        indices = [only] if only is not None else range(cases)
        for i in indices:
            case = factory.case(i)
            peak_before = _peak_mb()
            outcome, crash = run_case(case, fmt, work)
            if crash is None and peak_before <= CASE_MEGABYTES < _peak_mb():
                crash = Crash(i, "memory", f"peak RSS {_peak_mb()} MB after {outcome}", "",
                              case.steps)
            if outcome.startswith("ConversionBugError: "):
                bugs.setdefault(outcome.partition(": ")[2], i)
                outcome = "ConversionBugError"
            counts[outcome] += 1
            if crash is not None:
                crash.case = i
                crashes.append(crash)
                if save is not None:
                    target = save / f"{fmt}-{seed}-{i}"
                    shutil.copytree(work / "src", target, dirs_exist_ok=True)
    finally:
        signal.signal(signal.SIGALRM, old)
    return {
        "format": fmt,
        "seed": seed,
        "cases": sum(counts.values()),
        "outcomes": dict(sorted(counts.items())),
        "crashes": [asdict(c) | {"signature": c.signature} for c in crashes],
        "conversion_bugs": bugs,
        "seconds": round(time.perf_counter() - start, 2),
        "max_rss_mb": _peak_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("format", choices=["onnx", "onnx_ops", "tf", "caffe"])
    parser.add_argument("cases", type=int, nargs="?", default=1000)
    parser.add_argument("seed", type=int, nargs="?", default=0)
    parser.add_argument("--only", type=int)
    parser.add_argument("--save", type=Path)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="nhwc-fuzz-", dir=args.work) as tmp:
        result = run_campaign(args.format, args.cases, args.seed, Path(tmp), args.only,
                              args.save)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    raise SystemExit(main())
