"""Which tensors of a converted model the source computes too, and how to read each one in
the source's layout: the one mapping behind ``--layers`` and ``--bisect``.

Converters keep source tensor names on the tensors that survive conversion, and the model
records the source name of every renamed graph input/output (``source_names``) and the
permutation of each (``io_permutations``). The source's runtime says which of those names it
can fetch (``SourceReference.fetch_name``: a Caffe tensor is fetched by the layer computing
that version of its blob). An internal tensor's layout comes from its layout tag: one the
converted model stores channels-last (``NHWC``) is channels-first in an NCHW source (ONNX,
Caffe, a TensorFlow graph in NCHW), and a Flatten/Reshape of such a tensor to (batch,
features) holds the features in stored (H, W, C) order where the source has (C, H, W).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..ir import Model, Node, Value
from .compare import to_source_layout


@dataclass(frozen=True)
class Alignment:
    """How a converted tensor reads in the source's layout: transposed by the inverse of
    ``perm`` (converted = source.transpose(perm); None: as it is); with ``channels_last``,
    by the channels-last permutation of its rank; with ``stored``, a (batch, features)
    tensor flattened from that channels-last shape."""

    perm: tuple[int, ...] | None = None
    channels_last: bool = False
    stored: tuple[int, ...] | None = None

    def apply(self, array: np.ndarray) -> np.ndarray | None:
        if self.stored is not None:
            if array.size != int(np.prod(self.stored)) or array.ndim != 2:
                return None
            channels_first = (0, len(self.stored) - 1, *range(1, len(self.stored) - 1))
            return array.reshape(self.stored).transpose(channels_first).reshape(array.shape)
        perm = self.perm
        if self.channels_last:
            if array.ndim not in (3, 4, 5):
                return None
            perm = (0, *range(2, array.ndim), 1)
        if perm is not None and len(perm) != array.ndim:
            return None
        return to_source_layout(array, list(perm) if perm else None)


IDENTITY = Alignment()


@dataclass(frozen=True)
class SharedTensor:
    """A tensor both models compute."""

    converted: str  # its name in the converted model
    source: str  # its name in the source
    fetch: str  # what the source runtime fetches for it
    node: str  # the converted model's node computing it
    op: str
    source_op: str | None  # the source op that node came from, when recorded
    alignments: tuple[Alignment, ...]  # how it may read in the source layout, likeliest first

    def in_source_layout(self, array: np.ndarray, reference: np.ndarray) -> np.ndarray | None:
        """``array`` (the converted model's value) laid out as the source's ``reference``;
        None when no alignment gives its shape (not comparable). When several do (a flatten
        of a channels-last map: the source flattened its NCHW map, or a map it had permuted to
        NHWC itself, as SSD heads do; a map whose sizes coincide), the closest one."""
        views = [v for v in (a.apply(array) for a in self.alignments)
                 if v is not None and v.shape == reference.shape]
        if len(views) < 2:
            return views[0] if views else None
        return min(views, key=lambda v: float(np.max(np.abs(
            v.astype(np.float64) - reference), initial=0.0)))


def shared_tensors(model: Model, reference, source_names: Mapping[str, str],
                   perms: Mapping[str, list[int]], source_layout: str) -> list[SharedTensor]:
    """Every float32 tensor (the dialect's one float type) a node of ``model`` computes that
    the source's runtime can fetch too, in execution order (graph outputs included)."""
    graph = model.graph
    graph.toposort()
    shared = []
    for node in graph.nodes:
        for value in node.outputs:
            if value is None or not value.name or value.dtype != "float32":
                continue
            source = source_names.get(value.name, value.name)
            fetch = reference.fetch_name(value.name, source)
            if fetch is None:
                continue
            shared.append(SharedTensor(value.name, source, fetch, node.name, node.op,
                                       node.doc or None,
                                       alignments(value, node, perms, source_layout)))
    return shared


def alignments(value: Value, node: Node, perms: Mapping[str, list[int]],
               source_layout: str) -> tuple[Alignment, ...]:
    if value.name in perms:  # a graph output: its permutation is recorded
        perm = perms[value.name]
        return (Alignment(tuple(perm) if perm else None),)
    if value.layout == "NHWC":
        channels_first = Alignment(channels_last=True)
        return ((channels_first, IDENTITY) if source_layout == "NCHW"
                else (IDENTITY, channels_first))
    data = node.inputs[0] if node.inputs else None
    if (source_layout == "NCHW" and node.op in ("Reshape", "Flatten")
            and data is not None and data.layout == "NHWC" and data.shape is not None
            and len(data.shape) == 4 and all(isinstance(d, int) for d in data.shape)):
        return (Alignment(stored=tuple(data.shape)), IDENTITY)
    return (IDENTITY,)
