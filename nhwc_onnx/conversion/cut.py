"""The exact cut: when a conversion is refused, the largest part of the source graph that
converts exactly, as a list of output tensors the user can pass to ``--outputs``.

The refused nodes come from the public error (``UnsupportedOpError.problems``). Every node that
depends on a refused node is left out; the cut's outputs are the frontier: tensors computed
from graph inputs by the remaining nodes and read by a left-out node, plus the original outputs
that do not depend on a refused node. A cut is checked by converting it (once, ``MAX_CHECKS``):
a refusal found by that conversion (e.g. by a dialect pass) joins the refused set and the cut
is computed again, then suggested as *unchecked*. So a refusal costs at most the refused
conversion plus one conversion of a smaller graph, however many stages refuse side branches.
"""
from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field

from .. import frameworks
from ..errors import NhwcOnnxError, UnsupportedOpError
from ..frontends.topology import SourceGraph, SourceNode, locate
from ..options import ConvertOptions

__all__ = ["ExactCut", "SourceGraph", "SourceNode", "compute_cut", "inputs_needed", "locate",
           "search", "source_graph", "suggest"]

# Conversions of a cut after the refused one. One check keeps a refusal within about twice a
# conversion's time (each further stage that refused a side branch cost one more conversion,
# 5x on a 20,000-node graph); a frontend that collects every stage's refusals in its first
# run makes the first cut right, and the check confirms it.
MAX_CHECKS = 1


@dataclass
class ExactCut:
    """The suggestion: ``outputs`` (names for --outputs) convert ``converted`` of ``total``
    computing source nodes; ``reason`` says why there is none when ``outputs`` is empty."""

    outputs: list[str]
    converted: int
    total: int
    refused: list[str]
    reason: str = ""  # why there is no cut, or why ``outputs`` is not checked
    dropped_shapes: list[str] = field(default_factory=list)  # --input-shape of unread inputs
    checked: bool = True  # converting ``outputs`` succeeded (False: not tried, see ``reason``)

    @property
    def fraction(self) -> float:
        return self.converted / self.total if self.total else 0.0

    def line(self) -> str:
        if not self.outputs:
            return f"no useful exact cut: {self.reason}"
        dropped = (f" (and no --input-shape for {', '.join(self.dropped_shapes)}: the cut does "
                   "not read it)") if self.dropped_shapes else ""
        if not self.checked:
            return (f"to try the part that may be exact ({self.converted} of {self.total} "
                    f"source nodes; {self.reason}){dropped}: --outputs {','.join(self.outputs)}")
        return (f"to convert the part that is exact ({self.converted} of {self.total} source "
                f"nodes){dropped}: --outputs {','.join(self.outputs)}")

    def to_dict(self) -> dict:
        return {"outputs": list(self.outputs), "converted_nodes": self.converted,
                "source_nodes": self.total, "fraction": round(self.fraction, 4),
                "refused_nodes": list(self.refused), "reason": self.reason,
                "dropped_input_shapes": list(self.dropped_shapes), "checked": self.checked}


# -- the cut on a topology ----------------------------------------------------------------------


def compute_cut(graph: SourceGraph, refused: set[str], blocked: frozenset[str] = frozenset()
                ) -> tuple[list[str], int, int]:
    """(frontier tensor ids, computing nodes kept, computing nodes in all) for ``refused``
    nodes and ``blocked`` tensors (refused as such, e.g. a graph input of another type: no
    cut output, and their readers are refused)."""
    producer = {t: n for n in graph.nodes for t in n.outputs}
    live = set(graph.inputs)  # tensors that depend on a graph input (not constants)
    tainted: set[str] = set()  # nodes that depend on a refused node
    computing = []
    for node in graph.nodes:
        if any(t in live for t in node.inputs):
            live.update(node.outputs)
            computing.append(node)
        if node.name in refused or any(t in blocked or (
                producer.get(t) is not None and producer[t].name in tainted) for t in node.inputs):
            tainted.add(node.name)
    frontier: dict[str, None] = {}
    live -= set(graph.inputs) | blocked  # a graph input is no output worth suggesting
    for node in graph.nodes:
        if node.name not in tainted:
            continue
        for t in node.inputs:
            p = producer.get(t)
            if t in live and p is not None and p.name not in tainted:
                frontier[t] = None
    for t in graph.outputs:
        p = producer.get(t)
        if t in live and p is not None and p.name not in tainted:
            frontier[t] = None
    # nodes the frontier needs
    needed, kept = set(frontier), set()
    for node in reversed(graph.nodes):
        if any(t in needed for t in node.outputs):
            kept.add(node.name)
            needed.update(node.inputs)
    converted = sum(1 for n in computing if n.name in kept)
    return list(frontier), converted, len(computing)


def inputs_needed(graph: SourceGraph, frontier: list[str]) -> set[str]:
    """Names of the graph inputs the frontier depends on."""
    needed = set(frontier)
    for node in reversed(graph.nodes):
        if any(t in needed for t in node.outputs):
            needed.update(node.inputs)
    return {graph.name_of(t) for t in graph.inputs if t in needed}


def source_graph(path: str, framework: str | frameworks.Framework,
                 options: ConvertOptions) -> SourceGraph:
    """The source's topology, read by its frontend (``frontends/<name>/topology.py``)."""
    return frameworks.get(framework).source_graph(path, options)


# -- the suggestion -----------------------------------------------------------------------------


def suggest(source: str, framework: str | frameworks.Framework, options: ConvertOptions,
            error: UnsupportedOpError, try_convert) -> ExactCut:
    """The exact cut for a refused conversion. ``try_convert(options)`` converts the source
    with other options and raises like ``convert`` (it must not suggest cuts itself); it is
    called at most ``MAX_CHECKS`` times."""
    try:
        graph = source_graph(os.fspath(source), framework, options)
    except (NhwcOnnxError, OSError, ValueError) as exc:
        return ExactCut([], 0, 0, [p.node for p in error.problems],
                        f"the source graph could not be read again ({exc})")
    return search(graph, options, [p.node for p in error.problems], try_convert)


def search(graph: SourceGraph, options: ConvertOptions, problem_nodes: list[str], try_convert,
           checks: int = MAX_CHECKS) -> ExactCut:
    """The cut of ``graph`` without the nodes (or tensors) named by ``problem_nodes``, checked
    by up to ``checks`` calls of ``try_convert``; a cut still refused then is recomputed with
    the new refusals and returned with ``checked=False`` and the reason."""
    refused, blocked, unknown = locate(graph, problem_nodes)
    found_by_check: list[str] = []  # refusals the checking conversion added
    for attempt in range(checks + 1):
        if attempt:
            gc.collect()  # the refused attempt's graph (reference cycles) goes before the next
        if unknown:
            return ExactCut([], 0, 0, sorted(refused),
                            f"refused node(s) {', '.join(unknown)} are not source nodes")
        frontier, converted, total = compute_cut(graph, refused, frozenset(blocked))
        cut = ExactCut([graph.name_of(t) for t in frontier], converted, total,
                       sorted(refused | blocked))
        if not frontier or converted == 0:
            cut.outputs = []
            cut.reason = "every computing node depends on a refused node"
            return cut
        # An input the cut does not read is no input of the cut: its shape option must go.
        needed = inputs_needed(graph, frontier)
        unread = sorted(n for n in options.input_shapes
                        if n not in needed and n.split(":")[0] not in needed)
        cut.dropped_shapes = unread
        if attempt == checks:
            cut.checked = False
            cut.reason = (f"unchecked: converting the first cut refused {_names(found_by_check)}"
                          f" too; a cut is converted once at most")
            return cut
        shapes = {k: v for k, v in options.input_shapes.items() if k not in unread}
        try:
            try_convert(options.replace(outputs=cut.outputs, input_shapes=shapes))
        except UnsupportedOpError as again:
            more, more_blocked, unknown = locate(graph, [p.node for p in again.problems])
            if more <= refused and more_blocked <= blocked and not unknown:
                cut.outputs, cut.reason = [], f"converting the cut is refused too ({again})"
                return cut
            found_by_check += sorted((more - refused) | (more_blocked - blocked))
            refused |= more
            blocked |= more_blocked
            continue
        except NhwcOnnxError as exc:
            first = str(exc).splitlines()[0]
            cut.outputs, cut.reason = [], f"converting the cut fails ({first})"
            return cut
        return cut
    raise AssertionError("unreachable: the last attempt returns")


def _names(names: list[str], shown: int = 3) -> str:
    """'root', or 'a', 'b', 'c' and 4 more"""
    quoted = ", ".join(f"'{n}'" for n in names[:shown])
    return quoted + (f" and {len(names) - shown} more" if len(names) > shown else "")
