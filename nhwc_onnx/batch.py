"""Batch conversion: several sources, worker processes, one summary table.

One failure never stops the others; the exit code is the worst one seen.
"""
from __future__ import annotations

import time
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import click

from .errors import EXIT_INVALID, EXIT_OK, EXIT_VERIFY_FAILED, NhwcOnnxError


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


def convert_one(source: str, output: str, framework, options, flags, do_verify, atol, rtol):
    """Runs in a worker: never raises, returns a BatchOutcome."""
    from .api import convert, verify

    start = time.perf_counter()
    try:
        result = convert(source, output, framework=framework, options=options, **flags)
        outcome = BatchOutcome(source, output, "ok", EXIT_OK, 0.0,
                               dialect_nodes=len(result.model.graph))
        if do_verify:
            report = verify(source, result.model, framework=result.report.framework,
                            options=options, atol=atol, rtol=rtol)
            if not report.ok:
                worst = max(c.max_rel_error for c in report.outputs)
                outcome.status, outcome.exit_code = "mismatch", EXIT_VERIFY_FAILED
                outcome.message = f"outputs differ (max rel error {worst:.3g})"
    except NhwcOnnxError as exc:
        first = str(exc).splitlines()[0]
        outcome = BatchOutcome(source, output, "failed", exc.exit_code, 0.0, first)
    except Exception as exc:  # noqa: BLE001 - one bad model must not stop the batch
        outcome = BatchOutcome(source, output, "failed", EXIT_INVALID, 0.0,
                               f"internal error ({type(exc).__name__}: {exc})")
    outcome.seconds = time.perf_counter() - start
    return outcome


def convert_many(sources, out_dir: Path, framework, options, flags, jobs: int, do_verify: bool,
                 atol: float, rtol: float, quiet: bool = False) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    outputs = output_names(list(sources), out_dir)
    args = [(str(s), str(o), framework, options, flags, do_verify, atol, rtol)
            for s, o in zip(sources, outputs)]
    from .progress import BatchBar, wanted

    bar = BatchBar(len(args), wanted(quiet))
    try:
        if jobs <= 1:
            outcomes = [_reported(bar, convert_one(*a)) for a in args]
        else:
            with futures.ProcessPoolExecutor(max_workers=jobs) as pool:
                pending = [pool.submit(convert_one, *a) for a in args]
                for done in futures.as_completed(pending):
                    _reported(bar, done.result())
                outcomes = [f.result() for f in pending]
    finally:
        bar.close()
    if not quiet or any(o.status != "ok" for o in outcomes):
        click.echo(format_table(outcomes))
    return max((o.exit_code for o in outcomes), default=EXIT_OK)


def _reported(bar, outcome: BatchOutcome) -> BatchOutcome:
    bar.finished(outcome.source, outcome.status, outcome.seconds,
                 outcome.message if outcome.status != "ok" else "")
    return outcome


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
