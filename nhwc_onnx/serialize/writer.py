"""IR -> ONNX ModelProto, and atomic saving (with external data for models over 2 GB)."""
from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .. import __version__
from ..errors import OutputPathError
from ..files.writes import file_mode, open_temp, publish, temp_files, write_target
from ..ir import CORE, DIALECT, Graph, Model, Value
from ..ir.metadata import KEY_CONVERTER_VERSION, KEY_IO_PERMUTATIONS, encode_io_permutations
from ..onnxfile import AttributeProto, GraphProto, ModelProto, TensorProto, ValueInfoProto
from ..schemas import infer_shapes
from .attributes import attribute_type, fill_attribute
from .stream import ArrayWriter, write_streaming
from .tensors import fill_tensor, fill_tensor_header, fill_type

IR_VERSION = 8  # conservative: onnxruntime 1.31 refuses the IR 14 that onnx 1.23 writes
DIALECT_OPSET_VERSION = 1
DEFAULT_DOMAIN_OPSET = 17  # declared so onnx.checker knows which standard opset applies
CORE_OPSET_VERSION = 1

# Protobuf cannot serialize a message of 2 GiB or more; keep a margin for the graph itself.
EXTERNAL_DATA_THRESHOLD = 2**31 - 2**26
EXTERNAL_MIN_TENSOR_BYTES = 1024  # small tensors stay inline even in an external-data model
EXTERNAL_ALIGNMENT = 64
# Over this many weight bytes the kernel is asked to start writing each stretch this long as
# soon as it is written, so the final fsync waits for the last stretch only. 4 MB rather than
# 32 MB: a small model then overlaps its disk writes too (docs/benchmarks.md, "Measured
# choices in the code").
WRITEBACK_BYTES = 4 << 20
WRITEBACK_ALIGNMENT = 64 << 10  # a multiple of every page size Linux uses for file data


# (array, tensor proto) -> None: stores the array's bytes outside the model
ExternalSink = Callable[[np.ndarray, TensorProto], None]


def to_onnx(model: Model, domain: str = DIALECT, weights_as_constants: bool = False):
    """The ``onnx.ModelProto`` of ``model`` (see ``build_proto``; imports onnx)."""
    import onnx

    proto = build_proto(model, domain=domain, weights_as_constants=weights_as_constants)
    return onnx.ModelProto.FromString(proto.SerializeToString())


def build_proto(
    model: Model,
    domain: str = DIALECT,
    weights_as_constants: bool = False,
    external: ExternalSink | None = None,
) -> ModelProto:
    """The ModelProto of ``model`` in our own classes (``nhwc_onnx.onnxfile``; nodes are
    written in topological order).

    Dialect nodes (IR domain ``nhwc`` or ``""``) are written in ``domain``; other domains are
    kept. Weights become initializers, or ``Constant`` nodes with ``weights_as_constants``.
    ``external`` (used by ``save``) receives tensors whose data goes to a side file.
    """
    graph = model.graph
    graph.toposort()
    proto = ModelProto()
    proto.ir_version = IR_VERSION
    proto.producer_name = model.producer_name or "nhwc-onnx"
    proto.producer_version = __version__
    if model.doc:
        proto.doc_string = model.doc
    proto.graph.name = graph.name or "graph"

    constants = graph.constants()
    used_domains = _write_weights(proto.graph, constants, domain, weights_as_constants, external)
    used_domains |= _write_nodes(proto.graph, graph, domain)
    _write_value_infos(proto.graph, model, constants)
    for dom, version in _opset_imports(used_domains, domain):
        opset = proto.opset_import.add()
        opset.domain = dom
        opset.version = version
    for key, value in sorted(_metadata(model).items()):
        entry = proto.metadata_props.add()
        entry.key = key
        entry.value = value
    return proto


def _write_weights(
    gp: GraphProto, constants: list[Value], domain: str, as_constants: bool,
    external: ExternalSink | None,
) -> set[str]:
    """Constants as initializers (filled in place) or as leading Constant nodes."""
    if as_constants:
        for v in constants:
            node = gp.node.add()
            node.op_type = "Constant"
            node.domain = domain
            node.name = v.name
            node.output.append(v.name)
            fill_attribute(node.attribute.add(), "value", v.const, AttributeProto.TENSOR,
                           v.name)
        return {domain} if constants else set()
    for v in constants:
        assert v.const is not None  # Graph.constants: values with an array
        tensor = gp.initializer.add()
        if external is not None and v.const.nbytes >= EXTERNAL_MIN_TENSOR_BYTES:
            fill_tensor_header(tensor, v.const, v.name)
            external(v.const, tensor)
        else:
            fill_tensor(tensor, v.const, v.name)
    return set()


def _write_nodes(gp: GraphProto, graph: Graph, domain: str) -> set[str]:
    """Every node, attributes sorted by name; returns the operator domains used."""
    used: set[str] = set()
    for node in graph.nodes:
        out_domain = domain if node.domain in (DIALECT, "") else node.domain
        used.add(out_domain)
        proto_node = gp.node.add()
        proto_node.op_type = node.op
        proto_node.domain = out_domain
        proto_node.name = node.name
        proto_node.input.extend("" if v is None else v.name for v in node.inputs)
        proto_node.output.extend(v.name for v in node.outputs)
        if node.doc:
            proto_node.doc_string = node.doc
        for name in sorted(node.attrs):
            value = node.attrs[name]
            attr_type = attribute_type(node.op, node.domain, name, value)
            fill_attribute(proto_node.attribute.add(), name, value, attr_type, node.name)
    return used


def _write_value_infos(gp: GraphProto, model: Model, constants: list[Value]) -> None:
    """Types of graph inputs and outputs, and of every other tensor whose shape is known."""
    graph = model.graph
    inferred = _inferred_shapes(model)
    for v in graph.inputs:
        _add_value_info(gp.input.add(), v, inferred)
    for v in graph.outputs:
        _add_value_info(gp.output.add(), v, inferred)
    skip = {id(v) for v in (*graph.inputs, *graph.outputs, *constants)}
    for v in graph.values():
        if id(v) not in skip and (v.shape is not None or v.name in inferred):
            _add_value_info(gp.value_info.add(), v, inferred)


def _add_value_info(info: ValueInfoProto, v: Value, inferred: dict[str, tuple]) -> None:
    info.name = v.name
    shape = v.shape if v.shape is not None else inferred.get(v.name)
    fill_type(info.type, v.dtype, shape, v.layout)


def _inferred_shapes(model: Model) -> dict[str, tuple]:
    """Shapes the dialect's inference gives (for value_info only; the IR is not changed).

    onnx.checker requires a shape on every graph output, and Netron shows the others.
    """
    if all(v.shape is not None for v in model.graph.values()):
        return {}  # nothing to fill in (the usual case after conversion): skip a whole pass
    try:
        return infer_shapes(model)
    except Exception:  # noqa: BLE001  (a courtesy here: an invalid model must still be writable)
        return {}


def _opset_imports(used: set[str], dialect_domain: str) -> list[tuple[str, int]]:
    versions = {"": DEFAULT_DOMAIN_OPSET}
    for dom in used:
        if dom == "":
            continue
        if dom == dialect_domain:
            versions[dom] = DIALECT_OPSET_VERSION
        elif dom == CORE:
            versions[dom] = CORE_OPSET_VERSION
        else:
            versions[dom] = 1
    if dialect_domain:
        versions.setdefault(dialect_domain, DIALECT_OPSET_VERSION)
    return sorted(versions.items())


def _metadata(model: Model) -> dict[str, str]:
    meta = {str(k): str(v) for k, v in model.metadata.items()}
    meta.setdefault(KEY_CONVERTER_VERSION, __version__)
    if model.io_permutations:
        meta[KEY_IO_PERMUTATIONS] = encode_io_permutations(model.io_permutations)
    return meta


def to_bytes(model: Model, domain: str = DIALECT, weights_as_constants: bool = False) -> bytes:
    """Deterministic serialized bytes of ``model`` (all data inline)."""
    proto = build_proto(model, domain=domain, weights_as_constants=weights_as_constants)
    return proto.SerializeToString(deterministic=True)


def save(
    model: Model,
    path: str | os.PathLike,
    domain: str = DIALECT,
    weights_as_constants: bool = False,
    external_threshold: int = EXTERNAL_DATA_THRESHOLD,
    *,
    follow_symlinks: bool = True,
) -> Path:
    """Write ``model`` to ``path`` atomically; returns the path.

    When the weights exceed ``external_threshold`` bytes they go to ``<name>.data`` next to the
    model (ONNX external data, relative location). Nothing is left behind on failure and an
    existing file at ``path`` stays untouched. A symlink at ``path`` is written through to its
    target unless ``follow_symlinks`` is False (a name the caller derived: the link is
    replaced); one at the derived ``<name>.data`` is always replaced.
    """
    path = write_target(path, "output", follow_symlinks=follow_symlinks)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot create the output folder ({_reason(exc)})") from None
    weight_bytes = sum(v.const.nbytes for v in model.graph.constants() if v.const is not None)
    use_external = weight_bytes > external_threshold
    if use_external and weights_as_constants:
        raise OutputPathError(
            f"{path}: weights of {weight_bytes / 2**30:.2f} GiB need ONNX external data, which "
            "only initializers can use; save without weights_as_constants")
    with temp_files(path) as temps:
        data_tmp = None
        proto = None
        early = weight_bytes > WRITEBACK_BYTES
        if use_external:
            write_target(_data_path(path), "external-data file", follow_symlinks=False)
            data_tmp, sink = _external_sink(path, temps, early)
            proto = build_proto(model, domain=domain, external=sink)
            with data_tmp:
                data_tmp.flush()
                os.fsync(data_tmp.fileno())
        elif weights_as_constants:
            proto = build_proto(model, domain=domain, weights_as_constants=True)
        model_tmp = _temp_file(path, temps)
        with model_tmp:
            if proto is not None:
                model_tmp.write(proto.SerializeToString(deterministic=True))
            else:  # weights written straight from their arrays: no second copy in memory
                write_streaming(EarlyWriteback(model_tmp) if early else model_tmp,
                                lambda defer: build_proto(model, domain=domain, external=defer))
            model_tmp.flush()
            os.fsync(model_tmp.fileno())
        mode = file_mode(path)
        if data_tmp is not None:  # the pair is published together: no check between them
            os.chmod(data_tmp.name, mode)
            publish(data_tmp.name, _data_path(path))
            os.chmod(model_tmp.name, mode)
            publish(model_tmp.name, path, check_signal=False)
        else:
            os.chmod(model_tmp.name, mode)
            publish(model_tmp.name, path)
    return path


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _data_path(path: Path) -> Path:
    return path.with_name(path.name + ".data")


def _temp_file(path: Path, temps: list[Path]):
    return open_temp(path, temps)  # closed by the caller


def _external_sink(path: Path, temps: list[Path], early: bool):
    temp = _temp_file(_data_path(path), temps)
    handle = EarlyWriteback(temp) if early else temp
    location = _data_path(path).name
    writer = ArrayWriter(handle)

    def sink(array: np.ndarray, tensor: TensorProto) -> None:
        offset = handle.tell()
        pad = (-offset) % EXTERNAL_ALIGNMENT
        if pad:
            handle.write(b"\0" * pad)
            offset += pad
        writer.write(array)  # an ndarray or a DeferredArray (a folded weight)
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset)),
                           ("length", str(array.nbytes))):
            entry = tensor.external_data.add()
            entry.key = key
            entry.value = value

    return temp, sink


class EarlyWriteback:
    """A file being written whose bytes the kernel starts putting on disk every
    ``WRITEBACK_BYTES`` (Linux ``sync_file_range``, a hint: durability still comes from the
    fsync before the rename). Writing 100 MB then fsync: 63 -> 46 ms here, the fsync 38 -> 19 ms.
    Unlike ``posix_fadvise(DONTNEED)`` it leaves the pages cached for whoever reads the file next.
    """

    def __init__(self, handle):
        self.handle = handle
        self.start_writing = kernel_writeback()
        self.handed_over = 0  # bytes the kernel was asked to write

    def write(self, data) -> int:
        written = self.handle.write(data)
        if self.start_writing is not None:
            # Whole pages only: a write into a page under writeback waits for its disk write
            # (stable pages), which a range ending mid-page made every model pay.
            end = self.handle.tell() // WRITEBACK_ALIGNMENT * WRITEBACK_ALIGNMENT
            if end - self.handed_over >= WRITEBACK_BYTES:
                self.handle.flush()  # the range must be in the kernel's hands first
                self.start_writing(self.handle.fileno(), self.handed_over, end - self.handed_over)
                self.handed_over = end
        return written

    def tell(self) -> int:
        return self.handle.tell()


@functools.cache
def kernel_writeback() -> Callable[[int, int, int], object] | None:
    """``start(fd, offset, length)``: begin writing that range of a file to disk without
    waiting; None where the C library has no ``sync_file_range`` (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # only for large models: a start-up cost

    try:
        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    call.restype = ctypes.c_int
    write_only = 2  # SYNC_FILE_RANGE_WRITE: start the writeback, wait for nothing

    def start(fd: int, offset: int, length: int) -> object:
        return call(fd, offset, length, write_only)

    return start


def save_streamed(build: Callable[[Callable], ModelProto], path: str | os.PathLike) -> Path:
    """Write the ModelProto ``build(defer)`` returns to ``path`` atomically (same guarantees as
    ``save``), the tensors it passes to ``defer(array, tensor)`` written straight from their
    arrays (``stream.write_streaming``): the weights are never copied into bytes in memory."""
    path = write_target(path, "output")  # a symlink is written through to its target
    with temp_files(path) as temps:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = _temp_file(path, temps)
        with handle:
            write_streaming(handle, build)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(handle.name, file_mode(path))
        publish(handle.name, path)
    return path


def save_bytes(data: bytes, path: str | os.PathLike) -> Path:
    """Write already serialized bytes to ``path`` atomically (same guarantees as ``save``)."""
    path = write_target(path, "output")  # a symlink is written through to its target
    with temp_files(path) as temps:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = _temp_file(path, temps)
        with handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(handle.name, file_mode(path))
        publish(handle.name, path)
    return path
