"""Write a ModelProto's bytes with large initializers streamed from their numpy arrays.

``SerializeToString`` needs the whole model in memory twice over (every weight copied into the
proto, then into the output bytes). Protobuf messages are field sequences, and serializing the
fields of one message in field-number order in separate pieces gives exactly the bytes of the
whole; so the writer serializes everything but the big tensors' data normally and writes each
big tensor's raw_data straight from its array. The bytes equal ``to_bytes(model)``.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ..files.protowire import encode_varint as _varint
from ..ir import ScaledWeight
from ..onnxfile import ModelProto, TensorProto

# A weight that is not C-ordered little-endian bytes goes out in pieces of about this size
# through one reused buffer: a whole C-ordered copy would cost its size in fresh memory again.
CHUNK_BYTES = 16 << 20
# Bytes go to the file in write() calls of at most this size: larger calls were slower on
# Linux (docs/benchmarks.md, "Measured choices in the code").
WRITE_BYTES = 1 << 20
# A chunk whose source is strided along its last axis (a transposed weight) is gathered in
# blocks of this many columns: each block reads short contiguous runs of the source instead
# of one element per cache line (docs/benchmarks.md, "Measured choices in the code").
TILE_COLUMNS = 256
# Up to this size a strided copy stays in cache whole and numpy's own copy beats tiles
# (docs/benchmarks.md, "Measured choices in the code").
SMALL_COPY_BYTES = 512 << 10

# Field numbers from onnx.proto (facts of the format).
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_RAW_DATA = 9
# ModelProto fields before the graph (ir_version .. doc_string); GraphProto fields before the
# initializers (node, name). Everything else comes after.
_MODEL_BEFORE_GRAPH = ("ir_version", "producer_name", "producer_version", "domain",
                       "model_version", "doc_string")
_GRAPH_BEFORE_INITIALIZERS = ("node", "name")


def _tag(field: int) -> bytes:
    return _varint((field << 3) | 2)  # wire type 2: length-delimited


def _split(message, before: tuple[str, ...], skip: str) -> tuple[bytes, bytes]:
    """(bytes of the fields in ``before``, bytes of the fields after ``skip``)."""
    head = type(message)()
    tail = type(message)()
    head.CopyFrom(message)
    tail.CopyFrom(message)
    for field in message.DESCRIPTOR.fields:
        name = field.name
        if name in before:
            tail.ClearField(name)
        else:
            head.ClearField(name)
    tail.ClearField(skip)
    return head.SerializeToString(deterministic=True), tail.SerializeToString(deterministic=True)


# Not done: writing a chunk on a second thread while the next one is converted: it was
# slower (docs/benchmarks.md, "Measured choices in the code").
# The tiled copies and the kernel's copy into the page cache are both memory-bound: on two cores
# each slowed the other by about as much as they overlapped, and the GIL hand-overs cost CPU.
class Writable(Protocol):
    """What the writers here need of a file: its ``write`` (a file or an EarlyWriteback)."""

    def write(self, data: Any, /) -> int: ...


class ArrayWriter:
    """Writes arrays as ONNX raw bytes (C order, little endian) to ``handle``; arrays that are
    not already laid out that way are converted in row chunks through one reused buffer."""

    def __init__(self, handle: Writable, chunk_bytes: int | None = None):
        self.handle = handle
        self.chunk_bytes = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        self._buffer: np.ndarray | None = None

    def write(self, array: np.ndarray) -> None:
        scaled = array if isinstance(array, ScaledWeight) else None
        arr = np.asarray(array if scaled is None else scaled.base)
        target = arr.dtype.newbyteorder("<")
        if arr.size == 0:
            return
        if scaled is None and arr.flags.c_contiguous and _same_bytes(arr.dtype, target):
            # numpy's stubs give ndarray the buffer protocol for Python >= 3.12 only
            self._write(memoryview(arr.reshape(-1)).cast("B"))  # type: ignore[arg-type]
            return
        if arr.ndim == 0:
            arr = arr.reshape(1)
        row_bytes = arr.nbytes // arr.shape[0]
        if row_bytes > self.chunk_bytes and arr.ndim > 1:
            if scaled is not None:  # rows this long are not worth a second path
                self.write(scaled.materialize())
                return
            for row in arr:  # one row is already too big for a chunk: split it further
                self.write(row)
            return
        rows = max(1, self.chunk_bytes // row_bytes)
        rows = min(rows, arr.shape[0])
        if self._buffer is None or len(self._buffer) < rows * row_bytes:
            # At full chunk size and not zeroed: pages cost only when first written, so a
            # small model pays for what it uses, and no weight pays for a buffer grown again
            # (growing as needed zeroed more than twice the largest part).
            self._buffer = np.empty(max(self.chunk_bytes, rows * row_bytes), np.uint8)
        for start in range(0, arr.shape[0], rows):
            part = arr[start:start + rows]
            out = np.frombuffer(self._buffer, dtype=target, count=part.size).reshape(part.shape)
            _copy_into(out, part)
            if scaled is not None:  # the folded weight, computed in the buffer
                scaled.scale_into(out, slice(start, start + rows))
            # numpy's stubs again (see above)
            self._write(memoryview(self._buffer)[:part.nbytes])  # type: ignore[arg-type]
            del out

    def _write(self, data: memoryview) -> None:
        for start in range(0, len(data), WRITE_BYTES):
            self.handle.write(data[start:start + WRITE_BYTES])


def _copy_into(out: np.ndarray, part: np.ndarray) -> None:
    """``out[...] = part`` (same shape), fast for the strided parts weights come as."""
    if part.nbytes <= SMALL_COPY_BYTES:
        np.copyto(out, part, casting="equiv")
        return
    plan = transpose_plan(part)
    if plan is not None:
        _copy_in_tiles(out.reshape(plan[0].shape), *plan)
    elif part.ndim > 1 and part.shape[-1] > TILE_COLUMNS and part.strides[-1] != part.itemsize:
        for column in range(0, part.shape[-1], TILE_COLUMNS):
            block = slice(column, column + TILE_COLUMNS)
            np.copyto(out[..., block], part[..., block], casting="equiv")
    else:
        np.copyto(out, part, casting="equiv")


# A transposed copy goes tile by tile: runs of up to 1024 source elements (4 KB of float32) from
# 16 places at a time, so both sides of a tile stay in cache (power-of-two strides make square
# tiles evict each other). Runs shorter than SHORT_RUN (OIHW -> OHWI: runs of kH*kW) cost
# numpy calls more than cache misses: tiles of 8192 elements. The sizes were measured
# (docs/benchmarks.md, "Measured choices in the code").
TILE_RUN = 1024
TILE_ROWS = 16
SHORT_RUN = 64
SHORT_RUN_TILE_ELEMENTS = 8192


def transpose_plan(part: np.ndarray) -> tuple[np.ndarray, int, int] | None:
    """``(source, q_tile, p_tile)`` when ``part`` is a batch of 2-D transposes of dense memory.

    That is the shape of every weight the dialect stores in another order than its source
    (HWIO -> OHWI: one transpose of (kH*kW*C, M); OIHW -> OHWI: per output channel, one of
    (C, kH*kW); MatMul (K, M) -> Dense (M, K)). ``source`` is a (B, Q, P) strided view of
    ``part``'s memory, laid out there as (B, P, Q), whose C-ordered copy is ``part``'s bytes.
    Copied whole, numpy reads one element per cache line; in tiles it streams (1.1 -> 4 GB/s).
    Gaps between runs are fine (a row chunk of a transposed weight has them). None for
    anything else: C-ordered already, reversed or broadcast axes, axes interleaved otherwise.
    """
    dims = [(n, st) for n, st in zip(part.shape, part.strides) if n != 1]
    if len(dims) < 2 or any(st <= 0 for _, st in dims):
        return None
    order = sorted(range(len(dims)), key=lambda a: -dims[a][1])  # outermost in memory first
    lead = 0
    while lead < len(order) and order[lead] == lead:
        lead += 1
    if lead >= len(order) - 1:
        return None  # C order (perhaps with gaps): the plain copy streams already
    split = order[lead]
    if order[lead:] != list(range(split, len(dims))) + list(range(lead, split)):
        return None
    groups = []
    for axes in (range(lead), range(lead, split), range(split, len(dims))):
        size, stride = 1, None
        for a in reversed(axes):  # innermost first: each axis must step over the ones inside
            n, st = dims[a]
            if stride is not None and st != stride * size:
                return None
            stride = st if stride is None else stride
            size *= n
        groups.append((size, part.itemsize if stride is None else stride))
    (b, sb), (q, sq), (p, sp) = groups
    source = np.lib.stride_tricks.as_strided(part, (b, q, p), (sb, sq, sp), writeable=False)
    q_tile = min(q, TILE_RUN)
    if q_tile < SHORT_RUN:
        return source, q_tile, max(1, SHORT_RUN_TILE_ELEMENTS // q_tile)
    return source, q_tile, TILE_ROWS


def _copy_in_tiles(out: np.ndarray, source: np.ndarray, q_tile: int, p_tile: int) -> None:
    _, q, p = source.shape
    for q0 in range(0, q, q_tile):
        for p0 in range(0, p, p_tile):
            np.copyto(out[:, q0:q0 + q_tile, p0:p0 + p_tile],
                      source[:, q0:q0 + q_tile, p0:p0 + p_tile], casting="equiv")


def _same_bytes(dtype: np.dtype, little: np.dtype) -> bool:
    """Whether an array of ``dtype`` already holds the little-endian bytes of ``little``."""
    if dtype.byteorder == "=" and sys.byteorder == "big" and dtype.itemsize > 1:
        return False
    return dtype.byteorder != ">" or dtype.itemsize == 1


def write_streaming(handle: Writable, build: Callable[[Callable], ModelProto]) -> None:
    """``build(defer)`` returns the ModelProto whose deferred tensors hold only a header;
    ``defer(array, tensor)`` marks a tensor whose data is written here from ``array``."""
    deferred: dict[int, np.ndarray] = {}
    order: list[TensorProto] = []

    def defer(array: np.ndarray, tensor: TensorProto) -> None:
        deferred[len(order)] = array
        order.append(tensor)

    proto = build(defer)
    graph = proto.graph
    # Headers of every initializer (deferred ones without data), in file order.
    pieces: list[tuple[bytes, np.ndarray | None]] = []
    deferred_ids = {id(t): i for i, t in enumerate(order)}
    for tensor in graph.initializer:
        index = deferred_ids.get(id(tensor))
        header = tensor.SerializeToString(deterministic=True)
        # Kept as given: a transposed view is made C-ordered only when written, one at a time
        # (converting all here would hold a second copy of every such weight at once).
        pieces.append((header, None if index is None else deferred[index]))
    graph_head, graph_tail = _split(graph, _GRAPH_BEFORE_INITIALIZERS, "initializer")
    graph.ClearField("initializer")
    model_head, model_tail = _split(proto, _MODEL_BEFORE_GRAPH, "graph")

    init_sizes = []
    for header, array in pieces:
        size = len(header)
        if array is not None:
            size += len(_tag(_TENSOR_RAW_DATA)) + len(_varint(array.nbytes)) + array.nbytes
        init_sizes.append(size)
    graph_size = len(graph_head) + len(graph_tail) + sum(
        len(_tag(_GRAPH_INITIALIZER)) + len(_varint(s)) + s for s in init_sizes)

    writer = ArrayWriter(handle)
    handle.write(model_head)
    handle.write(_tag(_MODEL_GRAPH) + _varint(graph_size))
    handle.write(graph_head)
    for (header, array), size in zip(pieces, init_sizes):
        handle.write(_tag(_GRAPH_INITIALIZER) + _varint(size))
        handle.write(header)
        if array is not None:
            handle.write(_tag(_TENSOR_RAW_DATA) + _varint(array.nbytes))
            writer.write(array)
    handle.write(graph_tail)
    handle.write(model_tail)
