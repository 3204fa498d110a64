"""Batch conversion: several sources, worker processes, one outcome per source.

One failure never stops the others. The caller (the command line) shows the progress and the
summary table (``format_table``); the exit code is the worst one seen (``exit_code``).

The output and report names are derived (``output_names``, ``report_names``), so a symlink
found at one of them is replaced, never written through (``nhwc_onnx.files.writes``). A signal
stops the whole batch: each worker removes its temp files and exits, and no model that had not
started is converted (``nhwc_onnx.files.signals``).
"""
from __future__ import annotations

import contextlib
import gc
import logging
import os
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

from .. import frameworks
from ..errors import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_VERIFY_FAILED,
    NhwcOnnxError,
    OutputPathError,
    UnsupportedOpError,
    UsageError,
)
from ..options import ConvertOptions

log = logging.getLogger("nhwc_onnx.conversion.several")
REPORT_SUFFIX = ".report.json"  # <report dir>/<output stem>.report.json, one per model


@dataclass
class BatchOutcome:
    source: str
    output: str
    status: str  # "ok", "failed", "mismatch"
    exit_code: int
    seconds: float
    message: str = ""  # why it failed: the whole error, every refused node and the exact cut
    dialect_nodes: int = 0
    warnings: list[str] = field(default_factory=list)


def output_names(sources: list[str], out_dir: Path) -> list[Path]:
    """<dir>/<stem>.onnx, made unique when two sources share a stem. A folder (a SavedModel)
    is named by its own name, also when spelled '.' or 'models/..'."""
    from ..files.writes import fitted

    used: set[str] = set()
    paths = []
    for src in sources:
        p = Path(src)
        try:
            folder = p.is_dir()
        except OSError:  # a name too long: that source fails when it is read, not the batch
            folder = False
        stem = (Path(os.path.abspath(p)).name or "model") if folder else p.stem
        # room for the longer of the two names derived from it (and a _N)
        stem = fitted(stem, REPORT_SUFFIX, reserve=8)[:-len(REPORT_SUFFIX)]
        name, i = stem, 1
        while name in used:
            name, i = f"{stem}_{i}", i + 1
        used.add(name)
        paths.append(out_dir / f"{name}.onnx")
    return paths


def report_names(outputs: list[Path], report_dir: Path) -> list[Path]:
    """<report dir>/<output stem>.report.json: unique because the outputs' stems are, and
    never an output's name (those end in .onnx)."""
    return [report_dir / f"{o.stem}{REPORT_SUFFIX}" for o in outputs]


def plan(sources, out_dir: Path, report_dir: Path | None, options: ConvertOptions
         ) -> tuple[list[Path], list]:
    """Every output (and report) path, checked before anything is converted.

    Raises OutputPathError naming every output that is a source (same inode, or inside a
    SavedModel folder) or another planned output, or that cannot be written (a dangling
    symlink as the output or report folder included). The names are derived: a symlink at one
    of them will be replaced, not followed.
    """
    from ..files.writes import plan_targets
    from .convert import source_files

    outputs = output_names(list(sources), out_dir)
    reports = report_names(outputs, report_dir) if report_dir is not None else []
    inputs = [f for s in sources for f in source_files(s, options)]
    plan_targets([("output", o) for o in outputs] + [("report", r) for r in reports], inputs,
                 follow_symlinks=False)
    return outputs, reports or [None] * len(outputs)


def options_per_source(sources, options: ConvertOptions) -> list[ConvertOptions]:
    """``--weights`` and ``--signature`` go to the sources that read them (a batch may mix
    Caffe nets and ONNX models); one that no source reads is a UsageError, as in single mode."""
    from .convert import DEFAULT_SIGNATURE

    given = {"weights": options.weights is not None,
             "signature": options.signature != DEFAULT_SIGNATURE}
    if not any(given.values()):
        return [options] * len(sources)
    unset = {"weights": None, "signature": DEFAULT_SIGNATURE}
    why: dict[str, str] = {}
    per_source, read = [], dict.fromkeys(given, False)
    for source in sources:
        try:
            fw = frameworks.of(options, source)
        except NhwcOnnxError:  # reported by its own conversion
            per_source.append(options)
            continue
        drop = {}
        for name in (n for n, on in given.items() if on):
            unread = frameworks.unread_options(fw, source, **{**dict.fromkeys(given, False),
                                                              name: True})
            if unread:
                drop[name] = unset[name]
                why.setdefault(name, f"{source}: {unread[0]}")
            else:
                read[name] = True
        per_source.append(options.replace(**drop) if drop else options)
    unused = [why[name] for name, on in given.items() if on and not read[name] and name in why]
    if unused:
        raise UsageError("no source reads it: " + "; ".join(unused))
    return per_source


def worker_count(jobs: int, sources: int) -> int:
    """min(--jobs, number of sources, usable CPUs): more processes only add start-up cost."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(jobs, sources, cpus or 1))


@dataclass(frozen=True)
class Verification:
    """Verify each converted model before writing it (``--verify``), with these tolerances
    (and ``--layers`` / ``--samples``, whose results go to each model's report)."""

    atol: float
    rtol: float
    layers: bool = False
    samples: int = 1


def convert_one(source: str, output: str, options: ConvertOptions,
                verification: Verification | None = None, report_path: str | None = None
                ) -> BatchOutcome:
    """One model of a batch: never raises (except on a signal), returns a BatchOutcome. With
    ``report_path`` its report is written there, a refusal's report too."""
    outcome = _convert_one(source, output, options, verification, report_path)
    # A converted model is a graph of reference cycles: free it, and the source file it maps,
    # before the next model (the command line collects cycles only every 100,000 allocations).
    gc.collect()
    return outcome


def _convert_one(source: str, output: str, options: ConvertOptions,
                 verification: Verification | None, report_path: str | None) -> BatchOutcome:
    from ..files.writes import all_or_nothing
    from .convert import VerifyBeforeWrite, convert
    from .report import write_refusal_report, write_report

    start = time.perf_counter()
    report = None if report_path is None else Path(report_path)
    try:
        check = None if verification is None else VerifyBeforeWrite(
            source, options, atol=verification.atol, rtol=verification.rtol,
            layers=verification.layers, samples=verification.samples)
        with all_or_nothing():  # the model and its report, or neither
            result = convert(source, output, options, before_write=check,
                             follow_symlinks=False)
            verification = check.report if check is not None else None
            if report is not None:
                try:
                    write_report(report, result.report, verification, follow_symlinks=False)
                except OutputPathError as exc:
                    raise OutputPathError(f"{exc}; so {output} was not written either"
                                          ) from None
        outcome = BatchOutcome(source, output, "ok", EXIT_OK, 0.0,
                               dialect_nodes=len(result.model.graph),
                               warnings=list(result.report.warnings))
        if verification is not None and not verification.ok:
            worst = max(c.max_rel_error for c in verification.outputs)
            outcome.status, outcome.exit_code = "mismatch", EXIT_VERIFY_FAILED
            outcome.message = f"outputs differ (max rel error {worst:.3g}); not written"
    except UnsupportedOpError as exc:
        outcome = BatchOutcome(source, output, "failed", exc.exit_code, 0.0, str(exc))
        if report is not None:  # the refusal and the exact cut, as in single mode
            refusal = exc  # the lambda runs right here
            _write_report(outcome, lambda: write_refusal_report(
                report, source, refusal, follow_symlinks=False))
    except NhwcOnnxError as exc:
        outcome = BatchOutcome(source, output, "failed", exc.exit_code, 0.0, str(exc))
    except Exception as exc:  # noqa: BLE001 - one bad model must not stop the batch
        outcome = BatchOutcome(source, output, "failed", EXIT_INVALID, 0.0,
                               f"internal error ({type(exc).__name__}: {exc})")
    outcome.seconds = time.perf_counter() - start
    return outcome


def _write_report(outcome: BatchOutcome, write: Callable[[], None]) -> None:
    """Write a refused model's report; a failure is said after the refusal."""
    try:
        write()
    except NhwcOnnxError as exc:
        lines = [outcome.message] if outcome.message else []
        outcome.message = "\n".join(lines + [f"its report was not written: {exc}"])
        outcome.exit_code = max(outcome.exit_code, exc.exit_code)


def convert_many(sources, out_dir: Path, options: ConvertOptions, *, jobs: int = 1,
                 verification: Verification | None = None, report_dir: Path | None = None,
                 finished: Callable[[BatchOutcome], None] | None = None) -> list[BatchOutcome]:
    """Convert every source into ``out_dir`` (``output_names``), in up to ``jobs`` worker
    processes; every output path is checked first (``plan``). One outcome per source, in the
    order given; ``finished(outcome)`` hears of each as it ends."""
    per_source = options_per_source(sources, options)
    outputs, reports = plan(sources, out_dir, report_dir, options)
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [(str(s), str(o), opts, verification, None if r is None else str(r))
            for s, o, r, opts in zip(sources, outputs, reports, per_source)]
    workers = worker_count(jobs, len(args))
    log.info("%d source(s), %d worker process(es) (--jobs %d)", len(args), workers, jobs)
    heard = finished or (lambda _outcome: None)
    if workers <= 1:
        from ..files.signals import raise_if_stopped

        outcomes = []
        for a in args:
            raise_if_stopped()  # never start a model after a signal
            outcomes.append(convert_one(*a))
            heard(outcomes[-1])
        return outcomes
    return _in_workers(args, workers, heard)


def exit_code(outcomes: list[BatchOutcome]) -> int:
    """The worst exit code of a batch (0 when every source converted)."""
    return max((o.exit_code for o in outcomes), default=EXIT_OK)


def _convert_in_worker(*args) -> BatchOutcome:
    """convert_one in a worker process: a signal ends the process once the model's temp files
    are removed (``signals.job``)."""
    from ..files import signals

    with signals.job():
        return convert_one(*args)


def _in_workers(args: list[tuple], workers: int,
                finished: Callable[[BatchOutcome], None]) -> list[BatchOutcome]:
    from ..files import signals

    # The pool's threads (and its workers, forked now) start with the handled signals blocked:
    # the kernel then gives a signal to the main thread, whose wait it interrupts, instead of
    # to a helper thread (the main thread would only notice it when the next model finished).
    # Each worker unblocks them once its handlers are installed.
    pool = None
    try:
        with signals.blocked():  # a signal that came meanwhile is raised as this block ends
            pool = futures.ProcessPoolExecutor(max_workers=workers,
                                               initializer=signals.install_in_worker)
            pending = {pool.submit(_convert_in_worker, *a): a for a in args}
        for done in futures.as_completed(pending):
            signals.raise_if_stopped()
            finished(_outcome(done, pending[done]))
        signals.raise_if_stopped()
        outcomes = [_outcome(f, a) for f, a in pending.items()]
    except signals.StoppedBySignal as exc:
        # Pass the signal on (a terminal sends Ctrl-C to the workers too; `kill` only to us):
        # each worker removes its temp files and exits, so no queued model starts.
        if pool is not None:
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                if process.is_alive():
                    with contextlib.suppress(OSError):  # it has just exited
                        os.kill(process.pid, exc.signum)
            pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return outcomes


def _outcome(done: futures.Future, args: tuple) -> BatchOutcome:
    """A finished job's outcome; a worker that died (killed, out of memory) fails its model."""
    try:
        return done.result()
    except futures.process.BrokenProcessPool:
        return BatchOutcome(args[0], args[1], "failed", EXIT_INVALID, 0.0,
                            "not converted: a worker process ended unexpectedly (killed, or "
                            "out of memory?)")


def format_table(outcomes: list[BatchOutcome]) -> str:
    """One row per source; a reason of several lines (a refusal: every refused node and the
    exact cut) continues below its row, indented."""
    rows = [("source", "status", "nodes", "seconds", "output / reason")]
    more: list[list[str]] = [[]]
    for o in outcomes:
        # split("\n"), not splitlines(): a name may hold a CR or another line boundary
        first, *rest = (o.output if o.status == "ok" else o.message).split("\n")
        rows.append((o.source, o.status, str(o.dialect_nodes or "-"), f"{o.seconds:.2f}", first))
        more.append(rest)
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for row, rest in zip(rows, more):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4])
        lines += [f"    {line}" for line in rest]
    ok = sum(o.status == "ok" for o in outcomes)
    lines.append(f"{ok} of {len(outcomes)} converted")
    return "\n".join(lines)
