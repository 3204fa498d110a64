"""The source graph as the exact cut reads it (``nhwc_onnx.cut``): a framework-neutral
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
    differ only for Caffe's in-place blobs)."""

    nodes: list[SourceNode]
    inputs: list[str]
    outputs: list[str]
    display: dict[str, str] = field(default_factory=dict)

    def name_of(self, tensor: str) -> str:
        return self.display.get(tensor, tensor)
