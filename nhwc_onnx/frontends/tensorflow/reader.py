"""Read a frozen GraphDef from a binary .pb or a text .pbtxt, without TensorFlow.

Every failure becomes one ModelLoadError line: empty, truncated, foreign containers (ZIP,
HDF5), text garbage, or a message that parses but holds no usable node.
"""
from __future__ import annotations

import os

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from ...errors import ModelLoadError
from ...files.reads import map_regular
from .proto import tf_graph_pb2
from .tensors import check_loadable
from .wire import WireFormatError, strip_tensor_contents

TEXT_SUFFIXES = (".pbtxt", ".pbtext", ".txt", ".prototxt")


def _read_bytes(path: str):
    """The file's bytes: memory-mapped (weights are later viewed, never copied); only a
    regular file of at most 2 GiB is read (see files.reads)."""
    return map_regular(path, path)


def _looks_like_text(data: bytes) -> bool:
    head = data[:4096]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        # A multi-byte character may be cut at the 4096 boundary: retry a little shorter.
        try:
            text = head[:-4].decode("utf-8")
        except UnicodeDecodeError:
            return False
    return all(c.isprintable() or c in "\t\r\n" for c in text)


def _parse_text(data: bytes, path: str) -> tf_graph_pb2.GraphDef:
    graph = tf_graph_pb2.GraphDef()
    try:
        text_format.Parse(data.decode("utf-8"), graph, allow_unknown_field=True)
    except UnicodeDecodeError:
        raise ModelLoadError(f"{path}: not UTF-8 text, so not a text GraphDef") from None
    except RecursionError:
        raise ModelLoadError(f"{path}: the text GraphDef nests too deeply to be a model") \
            from None
    except text_format.ParseError as exc:
        message = str(exc)
        line, column = exc.GetLine(), exc.GetColumn()
        if line is not None:
            message = message.removeprefix(f"{line}:{column} : ")
            message = f"line {line}, column {column}: {message}"
        raise ModelLoadError(f"{path}: not a text GraphDef: {message}") from None
    return graph


def _parse_binary(data, path: str) -> tf_graph_pb2.GraphDef:
    graph = tf_graph_pb2.GraphDef()
    try:
        graph.ParseFromString(data if isinstance(data, bytes) else memoryview(data))
    except (DecodeError, RuntimeError, ValueError) as exc:
        detail = str(exc).strip() or type(exc).__name__
        raise ModelLoadError(
            f"{path}: not a valid binary GraphDef (truncated or another format): {detail}"
        ) from None
    return graph


def _parse_binary_external(data, path: str) -> tf_graph_pb2.GraphDef:
    """Parse with large weights left in ``data`` (see wire.py); a plain parse otherwise."""
    try:
        stripped = strip_tensor_contents(data)
    except WireFormatError:
        stripped = None  # malformed: the plain parse below reports it properly
    return _parse_binary(data if stripped is None else stripped, path)


def _check_nodes(graph: tf_graph_pb2.GraphDef, path: str) -> None:
    if not len(graph.node):
        raise ModelLoadError(f"{path}: not a TensorFlow GraphDef (it holds no nodes)")
    for node in graph.node:
        if not node.name or not node.op:
            raise ModelLoadError(
                f"{path}: not a TensorFlow GraphDef (a node without a name or op type)"
            )


def read_graphdef(path: str | os.PathLike) -> tuple[tf_graph_pb2.GraphDef, object]:
    """Parse ``path`` as a GraphDef: text when the suffix says so or binary parsing fails on
    printable text, binary otherwise. Returns (graph, buffer the external weights live in)."""
    path = os.fspath(path)
    try:
        return _read_graphdef(path)
    except ModelLoadError:
        name = os.path.basename(path)
        if name.lower() not in ("saved_model.pb", "saved_model.pbtxt"):
            raise
        folder = os.path.dirname(path) or "."
        raise ModelLoadError(f"{path}: not a GraphDef but, by its name, the graph of a "
                             f"SavedModel: convert the SavedModel folder '{folder}'") from None


def _read_graphdef(path: str) -> tuple[tf_graph_pb2.GraphDef, object]:
    data = _read_bytes(path)
    check_loadable(data, path)
    if path.lower().endswith(TEXT_SUFFIXES):
        graph = _parse_text(bytes(data), path)
        data = None
    else:
        try:
            graph = _parse_binary_external(data, path)
        except ModelLoadError:
            if not _looks_like_text(data):
                raise
            graph = _parse_text(bytes(data), path)
            data = None
        else:
            # Printable text can parse as a (nonsense) binary message: prefer the text reading.
            if _looks_like_text(data) and not _plausible(graph):
                graph = _parse_text(bytes(data), path)
                data = None
    _check_nodes(graph, path)
    return graph, data


def _plausible(graph: tf_graph_pb2.GraphDef) -> bool:
    return bool(len(graph.node)) and all(n.name and n.op for n in graph.node)


def parse_graphdef_bytes(data: bytes, label: str = "<bytes>") -> tf_graph_pb2.GraphDef:
    """Parse serialized GraphDef bytes (used after freezing a SavedModel in memory)."""
    check_loadable(data, label)
    graph = _parse_binary_external(data, label)
    _check_nodes(graph, label)
    return graph, data
