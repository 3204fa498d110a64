"""Batch conversion: several sources, worker processes, one outcome per source.

One failure never stops the others. The caller (the command line) shows the progress and the
summary table (``format_table``); the exit code is the worst one seen (``exit_code``).
"""
from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

from .errors import EXIT_INVALID, EXIT_OK, EXIT_VERIFY_FAILED, NhwcOnnxError
from .options import ConvertOptions

log = logging.getLogger("nhwc_onnx.batch")
REPORT_SUFFIX = ".report.json"  # <report dir>/<output stem>.report.json, one per model


@dataclass
class BatchOutcome:
    source: str
    output: str
    status: str  # "ok", "failed", "mismatch"
    exit_code: int
    seconds: float
    message: str = ""
    dialect_nodes: int = 0


def output_names(sources: list[str], out_dir: Path) -> list[Path]:
    """<dir>/<stem>.onnx, made unique when two sources share a stem."""
    used: set[str] = set()
    paths = []
    for src in sources:
        p = Path(src)
        stem = p.name if p.is_dir() else p.stem
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
    SavedModel folder) or another planned output, or that cannot be written.
    """
    from .api import source_files
    from .outputs import plan_targets

    outputs = output_names(list(sources), out_dir)
    reports = report_names(outputs, report_dir) if report_dir is not None else []
    inputs = [f for s in sources for f in source_files(s, options)]
    plan_targets([("output", o) for o in outputs] + [("report", r) for r in reports], inputs)
    return outputs, reports or [None] * len(outputs)


def worker_count(jobs: int, sources: int) -> int:
    """min(--jobs, number of sources, usable CPUs): more processes only add start-up cost."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(jobs, sources, cpus or 1))


@dataclass(frozen=True)
class Verification:
    """Verify each converted model before writing it (``--verify``), with these tolerances."""

    atol: float
    rtol: float


def convert_one(source: str, output: str, options: ConvertOptions,
                verification: Verification | None = None, report_path: str | None = None
                ) -> BatchOutcome:
    """Runs in a worker: never raises (except on a signal), returns a BatchOutcome."""
    outcome = _convert_one(source, output, options, verification, report_path)
    # A converted model is a graph of reference cycles: free it, and the source file it maps,
    # before the next model (the command line collects cycles only every 100,000 allocations).
    gc.collect()
    return outcome


def _convert_one(source: str, output: str, options: ConvertOptions,
                 verification: Verification | None, report_path: str | None) -> BatchOutcome:
    from .api import VerifyBeforeWrite, convert

    start = time.perf_counter()
    try:
        check = None if verification is None else VerifyBeforeWrite(
            source, options, atol=verification.atol, rtol=verification.rtol)
        result = convert(source, output, options, before_write=check)
        outcome = BatchOutcome(source, output, "ok", EXIT_OK, 0.0,
                               dialect_nodes=len(result.model.graph))
        verification = check.report if check is not None else None
        if verification is not None and not verification.ok:
            worst = max(c.max_rel_error for c in verification.outputs)
            outcome.status, outcome.exit_code = "mismatch", EXIT_VERIFY_FAILED
            outcome.message = f"outputs differ (max rel error {worst:.3g}); not written"
        if report_path is not None:
            from .api import write_report

            write_report(Path(report_path), result.report, verification)
    except NhwcOnnxError as exc:
        first = str(exc).splitlines()[0]
        outcome = BatchOutcome(source, output, "failed", exc.exit_code, 0.0, first)
    except Exception as exc:  # noqa: BLE001 - one bad model must not stop the batch
        outcome = BatchOutcome(source, output, "failed", EXIT_INVALID, 0.0,
                               f"internal error ({type(exc).__name__}: {exc})")
    outcome.seconds = time.perf_counter() - start
    return outcome


def convert_many(sources, out_dir: Path, options: ConvertOptions, *, jobs: int = 1,
                 verification: Verification | None = None, report_dir: Path | None = None,
                 finished: Callable[[BatchOutcome], None] | None = None) -> list[BatchOutcome]:
    """Convert every source into ``out_dir`` (``output_names``), in up to ``jobs`` worker
    processes; every output path is checked first (``plan``). One outcome per source, in the
    order given; ``finished(outcome)`` hears of each as it ends."""
    outputs, reports = plan(sources, out_dir, report_dir, options)
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [(str(s), str(o), options, verification, None if r is None else str(r))
            for s, o, r in zip(sources, outputs, reports)]
    workers = worker_count(jobs, len(args))
    log.info("%d source(s), %d worker process(es) (--jobs %d)", len(args), workers, jobs)
    heard = finished or (lambda _outcome: None)
    if workers <= 1:
        outcomes = []
        for a in args:
            outcomes.append(convert_one(*a))
            heard(outcomes[-1])
        return outcomes
    return _in_workers(args, workers, heard)


def exit_code(outcomes: list[BatchOutcome]) -> int:
    """The worst exit code of a batch (0 when every source converted)."""
    return max((o.exit_code for o in outcomes), default=EXIT_OK)


def _in_workers(args: list[tuple], workers: int,
                finished: Callable[[BatchOutcome], None]) -> list[BatchOutcome]:
    from . import signals

    pool = futures.ProcessPoolExecutor(max_workers=workers, initializer=signals.install)
    try:
        pending = [pool.submit(convert_one, *a) for a in args]
        for done in futures.as_completed(pending):
            finished(done.result())
        outcomes = [f.result() for f in pending]
    except signals.StoppedBySignal as exc:
        # Pass the signal on so that each worker removes its temp files, then drop the rest.
        for process in list(getattr(pool, "_processes", {}).values()):
            if process.is_alive():
                os.kill(process.pid, exc.signum)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return outcomes


def format_table(outcomes: list[BatchOutcome]) -> str:
    rows = [("source", "status", "nodes", "seconds", "output / reason")]
    for o in outcomes:
        detail = o.output if o.status == "ok" else o.message
        rows.append((o.source, o.status, str(o.dialect_nodes or "-"), f"{o.seconds:.2f}", detail))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
    ok = sum(o.status == "ok" for o in outcomes)
    lines.append(f"{ok} of {len(outcomes)} converted")
    return "\n".join(lines)
