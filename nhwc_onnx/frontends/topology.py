"""The source graph as the exact cut reads it (``nhwc_onnx.conversion.cut``): a framework-neutral
topology. Each frontend's ``topology.source_graph(path, options)`` builds one from its own
parse of the source."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SourceNode:
    name: str
    op: str
    inputs: list[str]  # tensor ids
    outputs: list[str]


@dataclass
class SourceGraph:
    """Framework-neutral topology of a source model, nodes in dependency order.

    Tensor ids are unique; ``display`` maps an id to the name ``--outputs`` accepts (they
    differ only for Caffe's in-place blobs). ``declared``: what the source file says of its
    graph inputs and outputs, id -> (dtype or None, dims or None; a dim is an int, a symbol
    str or None), for ``info`` on a model that does not load; ``user_names``: id -> the name
    users know a graph input/output by, where it differs (Keras, SavedModel)."""

    nodes: list[SourceNode]
    inputs: list[str]
    outputs: list[str]
    display: dict[str, str] = field(default_factory=dict)
    declared: dict[str, tuple] = field(default_factory=dict)
    user_names: dict[str, str] = field(default_factory=dict)

    def name_of(self, tensor: str) -> str:
        return self.display.get(tensor, tensor)


def locate(graph: SourceGraph, problem_nodes: list[str]
           ) -> tuple[set[str], set[str], list[str]]:
    """Source nodes and tensors named by the problems, and the names that match neither.

    A pass may name a node after its source node plus a suffix (e.g. 'norm1.scale'); a
    frontend may name a graph input or output tensor (e.g. one of an unsupported type)."""
    names = {n.name for n in graph.nodes}
    tensors = {t: t for n in graph.nodes for t in n.outputs}
    tensors.update({t: t for t in graph.inputs})
    tensors.update({graph.name_of(t): t for t in list(tensors)})
    found, blocked, unknown = set(), set(), []
    for name in problem_nodes:
        if name in names:
            found.add(name)
            continue
        if name in tensors:
            blocked.add(tensors[name])
            continue
        best = ""
        for candidate in names:
            if (len(candidate) > len(best) and name.startswith(candidate)
                    and name[len(candidate)] in "./:_-"):
                best = candidate
        if best:
            found.add(best)
        else:
            unknown.append(name)
    return found, blocked, unknown


# -- reading topologies -------------------------------------------------------------------------
