"""Pass contract and manager.

A pass is ``call(model, ctx) -> PassResult(modified)``; it rewrites ``model.graph`` in place.
The manager times every pass, records op counts, and re-raises unexpected exceptions as
ConversionBugError naming the pass. Decisions worth reporting go to ``ctx.record``; a pass
that leaves a node unconverted says why in ``ctx.refusals``, where legalisation reads it. A pass
that refuses nodes outright hands its UnsupportedOpError to ``ctx.refuse_stage``: raised at once,
or, when the context collects refusals (the pipeline's does), kept while the passes go on so that
one error lists the refusals of every stage.
"""
from __future__ import annotations

import abc
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConversionBugError, NhwcOnnxError, NodeProblem, UnsupportedOpError
from ..ir import Model, Node
from ..options import ConvertOptions

log = logging.getLogger("nhwc_onnx.passes")


@dataclass
class PassResult:
    modified: bool


@dataclass
class Decision:
    """One reportable decision: a padding choice, a folded BatchNorm, a legalised op ..."""

    kind: str  # e.g. "padding", "fold_batchnorm", "fuse_bias", "legalize", "layout", "warning"
    node: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "node": self.node, "detail": self.detail, "data": self.data}


@dataclass
class PassContext:
    """The conversion's options every pass may read, and where it records what it decided."""

    options: ConvertOptions = field(default_factory=ConvertOptions)
    decisions: list[Decision] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Nodes a pass left unconverted, with the latest reason (the most specific one).
    refusals: dict[Node, NodeProblem] = field(default_factory=dict)
    collect_refusals: bool = False
    stage_refusals: list[UnsupportedOpError] = field(default_factory=list)
    # False: warnings are only collected (the second probe conversion of a symbolic batch
    # repeats the first's, which has logged them; nhwc_onnx.conversion.symbolic_batch)
    log_warnings: bool = True

    def refuse_stage(self, error: UnsupportedOpError) -> None:
        """A stage refuses nodes: raise, or keep the error and go on (``collect_refusals``)."""
        if not self.collect_refusals:
            raise error
        self.stage_refusals.append(error)

    def record(self, kind: str, node: str, detail: str, **data: Any) -> None:
        self.decisions.append(Decision(kind, node, detail, data))

    def warn(self, message: str) -> None:
        """A warning for the user: it goes into the report, whose ``warnings`` the command line
        prints once (``Warning: ...``); the log has it only at debug level (and not at all for
        a probe conversion, ``log_warnings=False``)."""
        if self.log_warnings:
            log.debug("warning: %s", message)
        self.warnings.append(message)


@dataclass
class PassStat:
    name: str
    seconds: float
    modified: bool
    nodes_before: int
    nodes_after: int


class Pass(abc.ABC):
    """Base class: subclasses set ``name`` and implement ``call``."""

    name = "pass"

    @abc.abstractmethod
    def call(self, model: Model, ctx: PassContext) -> PassResult:
        """Rewrite ``model.graph`` in place; say whether anything changed."""

    def __call__(self, model: Model, ctx: PassContext | None = None) -> PassResult:
        return self.call(model, ctx or PassContext())


class PassManager:
    def __init__(self, passes: list[Pass]):
        self.passes = passes
        self.stats: list[PassStat] = []

    def run(self, model: Model, ctx: PassContext) -> Model:
        for p in self.passes:
            before = len(model.graph)
            decided = len(ctx.decisions)
            start = time.perf_counter()
            try:
                result = p.call(model, ctx)
            except NhwcOnnxError:
                raise
            except Exception as exc:  # a bug in a pass: say which one
                raise ConversionBugError(f"internal error in pass '{p.name}': {exc!r}") from exc
            stat = PassStat(p.name, time.perf_counter() - start, result.modified, before,
                            len(model.graph))
            self.stats.append(stat)
            log.info("pass %s: %.3f s", p.name, stat.seconds)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("pass %s: %d -> %d nodes, %s; decisions: %s", p.name, before,
                          stat.nodes_after, "changed" if result.modified else "unchanged",
                          _by_kind(ctx.decisions[decided:]) or "none")
        return model


def _by_kind(decisions: list[Decision]) -> str:
    counts: dict[str, int] = {}
    for d in decisions:
        counts[d.kind] = counts.get(d.kind, 0) + 1
    return ", ".join(f"{kind} x{n}" for kind, n in sorted(counts.items()))
