"""What a conversion did, as the report (``--report``, docs/report-schema.json) records it."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import __version__
from ..errors import UnsupportedOpError
from ..ir import Model


@dataclass
class ConversionReport:
    """What a conversion did. ``to_dict`` follows docs/report-schema.json."""

    source: str
    framework: str
    output: str | None = None
    converter_version: str = __version__
    options: dict[str, Any] = field(default_factory=dict)
    source_ops: dict[str, int] = field(default_factory=dict)
    target_ops: dict[str, int] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    io_permutations: dict[str, list[int]] = field(default_factory=dict)
    # A symbolic batch: {"dim_param", "inputs", "outputs"} (the names that carry it); None
    # when every batch is fixed.
    batch: dict[str, Any] | None = None
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    passes: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def count(self, kind: str) -> int:
        return sum(1 for d in self.decisions if d.get("kind") == kind)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ConversionResult:
    model: Model
    report: ConversionReport
    output: str | None = None


def write_report(path: str | os.PathLike, report: ConversionReport, verification=None, *,
                 follow_symlinks: bool = True) -> None:
    """The conversion report (and the verification, if any) as JSON, written atomically."""
    from ..files.writes import write_json

    data = report.to_dict()
    if verification is not None:
        data["verification"] = verification.to_dict()
    write_json(path, data, role="report", follow_symlinks=follow_symlinks)


def refusal_report(source: str | os.PathLike, exc: UnsupportedOpError) -> dict[str, Any]:
    """The report of a refused conversion: every refused node and the exact cut (if any)."""
    cut = getattr(exc, "exact_cut", None)
    return {"source": os.fspath(source), "status": "refused", "framework": exc.framework,
            "refused": [{"node": p.node, "op": p.op, "reason": p.reason} for p in exc.problems],
            "exact_cut": cut.to_dict() if cut is not None else None}


def write_refusal_report(path: str | os.PathLike, source: str | os.PathLike,
                         exc: UnsupportedOpError, *, follow_symlinks: bool = True) -> None:
    """``refusal_report`` as JSON, written atomically (single conversions and batches)."""
    from ..files.writes import write_json

    write_json(path, refusal_report(source, exc), role="report", follow_symlinks=follow_symlinks)
