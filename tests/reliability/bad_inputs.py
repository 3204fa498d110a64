"""The catalog of broken and hostile inputs, one builder per (format, kind of bad input).

A builder writes its files into a folder and returns the source path and the extra CLI
arguments. Every case is a valid model of rel_models with one thing broken, so the error
seen is the one the case is about. ``CASES`` pairs each with the exit code and a fragment
of the one-line message the CLI must print.
"""
from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from rel_models import (
    CAFFE_PROTOTXT,
    caffe_layers,
    caffemodel_bytes,
    onnx_model,
    tf_bytes,
    tf_graphdef,
    tf_text,
)

from nhwc_onnx.errors import EXIT_INVALID, EXIT_UNREADABLE

HUGE = 1 << 40
TRUNCATE_FRACTIONS = (0.02, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99)

Build = Callable[[Path], tuple[Path, list[str]]]


@dataclass(frozen=True)
class BadCase:
    fmt: str
    kind: str
    build: Build
    code: int  # the documented exit code
    fragment: str  # expected in the one-line message (lower case)

    @property
    def id(self) -> str:
        return f"{self.fmt}-{self.kind}"


def random_bytes(n: int = 4096, seed: int = 5) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def zip_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("config.json", '{"class_name": "Functional"}')
        z.writestr("model.weights.h5", b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    return buf.getvalue()


HDF5 = b"\x89HDF\r\n\x1a\n" + bytes(range(256)) * 4
TEXT = b"This is a README, not a model.\nIt only has a misleading file name.\n" * 8


def _write(name: str, data: bytes | str, extra: Callable[[Path], list[str]] | None = None
           ) -> Build:
    def build(folder: Path) -> tuple[Path, list[str]]:
        path = folder / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path, extra(folder) if extra else []
    return build


# -- ONNX -------------------------------------------------------------------------------------


def _onnx_edit(edit: Callable, name: str = "model.onnx") -> Build:
    def build(folder: Path) -> tuple[Path, list[str]]:
        model = onnx_model()
        edit(model, folder)
        path = folder / name
        path.write_bytes(model.SerializeToString())
        return path, []
    return build


def _node(model, name: str):
    return next(n for n in model.graph.node if n.name == name)


def _init(model, name: str):
    return next(t for t in model.graph.initializer if t.name == name)


def _set_init(model, name: str, array: np.ndarray) -> None:
    _init(model, name).CopyFrom(numpy_helper.from_array(array, name))


def _external(location: str, write: dict[str, bytes] | None = None, length: int | None = None):
    """conv.w moved to external data at ``location`` (files in ``write`` created first)."""
    def edit(model, folder: Path) -> None:
        for rel, data in (write or {}).items():
            target = (folder / rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        tensor = _init(model, "conv.w")
        tensor.ClearField("raw_data")
        tensor.ClearField("float_data")
        tensor.data_location = TensorProto.EXTERNAL
        entries = {"location": location, "offset": "0"}
        if length is not None:
            entries["length"] = str(length)
        for key, value in entries.items():
            tensor.external_data.add(key=key, value=value)
    return edit


_W_BYTES = 4 * 3 * 3 * 3 * 4  # conv.w float32 bytes


def _onnx_symlink_out(model, folder: Path) -> None:
    outside = folder.parent / "outside-secret.bin"
    outside.write_bytes(b"\0" * _W_BYTES)
    (folder / "weights.bin").symlink_to(outside)
    _external("weights.bin")(model, folder)


def onnx_cases() -> list[BadCase]:
    def input_dims(dims):
        def edit(model, folder):
            del model.graph.input[:]
            model.graph.input.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, dims))
        return edit

    def reshape_to(target):
        return lambda m, f: _set_init(m, "flat.shape", np.array(target, np.int64))

    def short_weight(m, f):
        _init(m, "conv.w").raw_data = b"\0" * (_W_BYTES - 8)

    def huge_weight(m, f):
        t = _init(m, "conv.w")
        del t.dims[:]
        t.dims.extend([HUGE, 3, 3, 3])

    def cycle(m, f):
        _node(m, "relu").input[0] = "p"  # relu <- pool <- relu

    def dangling(m, f):
        _node(m, "relu").input[0] = "ghost"

    def duplicate_outputs(m, f):
        m.graph.node.append(helper.make_node("Relu", ["logits"], ["y"], name="second_y"))

    def duplicate_graph_outputs(m, f):
        m.graph.output.append(m.graph.output[0])

    valid = onnx_model().SerializeToString()
    cases = [
        BadCase("onnx", "empty file", _write("model.onnx", b""), EXIT_UNREADABLE, "empty"),
        BadCase("onnx", "random bytes", _write("model.onnx", random_bytes()), EXIT_UNREADABLE,
                "not"),
        BadCase("onnx", "text named .onnx", _write("model.onnx", TEXT), EXIT_UNREADABLE, "not"),
        BadCase("onnx", "ZIP named .onnx", _write("model.onnx", zip_bytes()), EXIT_UNREADABLE,
                "zip"),
        BadCase("onnx", "HDF5 named .onnx", _write("model.onnx", HDF5), EXIT_UNREADABLE, "hdf5"),
        BadCase("onnx", "graph with a cycle", _onnx_edit(cycle), EXIT_INVALID, "cycle"),
        BadCase("onnx", "input without producer", _onnx_edit(dangling), EXIT_INVALID, "ghost"),
        BadCase("onnx", "two nodes write one name", _onnx_edit(duplicate_outputs),
                EXIT_INVALID, "'y'"),
        BadCase("onnx", "graph output listed twice", _onnx_edit(duplicate_graph_outputs),
                EXIT_INVALID, "twice"),
        BadCase("onnx", "input dim 2^40", _onnx_edit(input_dims([HUGE, 3, 7, 5])), EXIT_INVALID,
                "x"),
        BadCase("onnx", "negative input dim", _onnx_edit(input_dims([-3, 3, 7, 5])),
                EXIT_INVALID, "x"),
        BadCase("onnx", "Reshape target 2^40", _onnx_edit(reshape_to([HUGE, -1])), EXIT_INVALID,
                "flatten"),
        BadCase("onnx", "Reshape negative target", _onnx_edit(reshape_to([2, -7])),
                EXIT_INVALID, "flatten"),
        BadCase("onnx", "Reshape count mismatch", _onnx_edit(reshape_to([2, 25])),
                EXIT_INVALID, "flatten"),
        BadCase("onnx", "weight data shorter than dims", _onnx_edit(short_weight),
                EXIT_UNREADABLE, "conv.w"),
        BadCase("onnx", "weight dims 2^40", _onnx_edit(huge_weight), EXIT_UNREADABLE,
                "conv.w"),
        BadCase("onnx", "external data absolute path",
                _onnx_edit(_external("/etc/passwd")), EXIT_UNREADABLE, "absolute"),
        BadCase("onnx", "external data escapes folder",
                _onnx_edit(_external("../outside.bin", {"../outside.bin": b"\0" * _W_BYTES})),
                EXIT_UNREADABLE, "outside"),
        BadCase("onnx", "external data symlink out", _onnx_edit(_onnx_symlink_out),
                EXIT_UNREADABLE, "outside"),
        BadCase("onnx", "external data missing", _onnx_edit(_external("weights.bin")),
                EXIT_UNREADABLE, "does not exist"),
        BadCase("onnx", "external data short",
                _onnx_edit(_external("weights.bin", {"weights.bin": b"\0" * 100})),
                EXIT_UNREADABLE, "too short"),
        BadCase("onnx", "external length disagrees",
                _onnx_edit(_external("weights.bin", {"weights.bin": b"\0" * 4096}, length=40)),
                EXIT_UNREADABLE, "length"),
    ]
    for frac in TRUNCATE_FRACTIONS:
        cut = int(len(valid) * frac)
        cases.append(BadCase("onnx", f"truncated at {cut} of {len(valid)}",
                             _write("model.onnx", valid[:cut]), EXIT_UNREADABLE, "model.onnx"))
    return cases


# -- TensorFlow ---------------------------------------------------------------------------------


def _tf_edit(edit: Callable) -> Build:
    def build(folder: Path) -> tuple[Path, list[str]]:
        graph = tf_graphdef()
        edit(graph)
        path = folder / "model.pb"
        path.write_bytes(graph.SerializeToString())
        return path, []
    return build


def _tf_node(graph, name: str):
    return next(n for n in graph.node if n.name == name)


def tf_cases() -> list[BadCase]:
    def placeholder_dims(dims):
        def edit(g):
            shape = _tf_node(g, "x").attr["shape"].shape
            del shape.dim[:]
            for d in dims:
                shape.dim.add(size=d)
        return edit

    def reshape_to(target):
        def edit(g):
            tensor = _tf_node(g, "flat/shape").attr["value"].tensor
            tensor.tensor_content = np.array(target, "<i4").tobytes()
        return edit

    def short_const(g):
        tensor = _tf_node(g, "conv/w").attr["value"].tensor
        tensor.tensor_content = tensor.tensor_content[:-8]

    def huge_const(g):
        tensor = _tf_node(g, "conv/w").attr["value"].tensor
        tensor.tensor_shape.dim[0].size = HUGE

    def cycle(g):
        _tf_node(g, "relu").input[0] = "pool"

    def dangling(g):
        _tf_node(g, "relu").input[0] = "ghost"

    def duplicate_name(g):
        extra = g.node.add()
        extra.CopyFrom(_tf_node(g, "relu"))
        extra.input[0] = "conv"

    broken_text = tf_text().splitlines()
    broken_line = len(broken_text) // 2
    broken_text[broken_line - 1] += " }}} {{"
    valid = tf_bytes()
    cases = [
        BadCase("tf", "empty file", _write("model.pb", b""), EXIT_UNREADABLE, "empty"),
        BadCase("tf", "random bytes", _write("model.pb", random_bytes()), EXIT_UNREADABLE,
                "graphdef"),
        BadCase("tf", "text named .pb", _write("model.pb", TEXT), EXIT_UNREADABLE, "graphdef"),
        BadCase("tf", "ZIP named .pb", _write("model.pb", zip_bytes()), EXIT_UNREADABLE, "zip"),
        BadCase("tf", "HDF5 named .pb", _write("model.pb", HDF5), EXIT_UNREADABLE, "hdf5"),
        BadCase("tf", "pbtxt syntax error",
                _write("model.pbtxt", "\n".join(broken_text) + "\n"), EXIT_UNREADABLE,
                f"line {broken_line}"),
        BadCase("tf", "graph with a cycle", _tf_edit(cycle), EXIT_INVALID, "cycle"),
        BadCase("tf", "input without producer", _tf_edit(dangling), EXIT_INVALID, "ghost"),
        BadCase("tf", "two nodes with one name", _tf_edit(duplicate_name), EXIT_INVALID,
                "relu"),
        BadCase("tf", "input dim 2^40", _tf_edit(placeholder_dims([HUGE, 7, 5, 3])),
                EXIT_INVALID, "x"),
        BadCase("tf", "negative input dim", _tf_edit(placeholder_dims([2, -7, 5, 3])),
                EXIT_INVALID, "x"),
        BadCase("tf", "Reshape target 2^40", _tf_edit(reshape_to([(1 << 31) - 1, -1])),
                EXIT_INVALID, "flat"),
        BadCase("tf", "Reshape negative target", _tf_edit(reshape_to([2, -7])), EXIT_INVALID,
                "flat"),
        BadCase("tf", "Reshape count mismatch", _tf_edit(reshape_to([2, 25])), EXIT_INVALID,
                "flat"),
        BadCase("tf", "Const data shorter than shape", _tf_edit(short_const), EXIT_UNREADABLE,
                "conv/w"),
        BadCase("tf", "Const shape 2^40", _tf_edit(huge_const), EXIT_INVALID, "conv/w"),
    ]
    for frac in TRUNCATE_FRACTIONS:
        cut = int(len(valid) * frac)
        cases.append(BadCase("tf", f"truncated at {cut} of {len(valid)}",
                             _write("model.pb", valid[:cut]), EXIT_UNREADABLE, "model.pb"))
    return cases


# -- Caffe ------------------------------------------------------------------------------------


def _caffe(prototxt: str | bytes = CAFFE_PROTOTXT, weights: bytes | None = None,
           weights_arg: str | None = None) -> Build:
    """A prototxt plus its caffemodel (``weights`` overrides the valid one)."""
    def build(folder: Path) -> tuple[Path, list[str]]:
        proto = folder / "deploy.prototxt"
        proto.write_bytes(prototxt.encode() if isinstance(prototxt, str) else prototxt)
        w = folder / "weights.caffemodel"
        w.write_bytes(caffemodel_bytes() if weights is None else weights)
        return proto, ["--weights", weights_arg or str(w)]
    return build


def _layers(**changes) -> bytes:
    """The valid caffemodel with some layers' blob lists replaced."""
    layers = [(n, t, changes.get(n, blobs)) for n, t, blobs in caffe_layers()]
    return caffemodel_bytes(layers)


def _blob_with_wrong_data_count() -> bytes:
    from nhwc_onnx.frontends.caffe import caffe_pb2

    net = caffe_pb2.NetParameter()
    net.ParseFromString(caffemodel_bytes())
    blob = net.layer[0].blobs[0]
    del blob.data[10:]  # shape still says 4x3x3x3
    return net.SerializeToString()


def _proto_with(old: str, new: str) -> str:
    assert old in CAFFE_PROTOTXT, old  # a broken fixture, not user input
    return CAFFE_PROTOTXT.replace(old, new)


def caffe_cases() -> list[BadCase]:
    conv_w, conv_b = caffe_layers()[0][2]
    reshape_layer = ('layer { name: "flat" type: "Reshape" bottom: "pool" top: "flat"\n'
                     '  reshape_param { shape { %s } } }\n'
                     'layer { name: "fc" type: "InnerProduct"')
    reshape = ('layer { name: "fc" type: "InnerProduct"', reshape_layer)
    syntax = CAFFE_PROTOTXT.splitlines()
    syntax[3] = syntax[3].replace("{", "{ {", 1)
    other_net = [("other_conv", "Convolution", [conv_w, conv_b]),
                 ("other_fc", "InnerProduct", [np.ones((6, 48)), np.ones(6)])]
    valid = caffemodel_bytes()
    cases = [
        BadCase("caffe", "empty prototxt", _caffe(""), EXIT_INVALID, "no layers"),
        BadCase("caffe", "random bytes as prototxt", _caffe(random_bytes()), EXIT_UNREADABLE,
                "binary"),
        BadCase("caffe", "caffemodel as prototxt", _caffe(valid), EXIT_UNREADABLE, "binary"),
        BadCase("caffe", "ZIP as prototxt", _caffe(zip_bytes()), EXIT_UNREADABLE, "binary"),
        BadCase("caffe", "prototxt syntax error", _caffe("\n".join(syntax)), EXIT_UNREADABLE,
                "line 4"),
        BadCase("caffe", "empty caffemodel", _caffe(weights=b""), EXIT_UNREADABLE, "empty"),
        BadCase("caffe", "random bytes as caffemodel", _caffe(weights=random_bytes()),
                EXIT_UNREADABLE, "caffemodel"),
        BadCase("caffe", "text as caffemodel", _caffe(weights=TEXT), EXIT_UNREADABLE,
                "caffemodel"),
        BadCase("caffe", "HDF5 as caffemodel", _caffe(weights=HDF5), EXIT_UNREADABLE,
                "caffemodel"),
        BadCase("caffe", "missing caffemodel", _caffe(weights_arg="nowhere.caffemodel"),
                EXIT_UNREADABLE, "nowhere.caffemodel"),
        BadCase("caffe", "caffemodel of another net", _caffe(weights=caffemodel_bytes(other_net)),
                EXIT_INVALID, "conv"),
        BadCase("caffe", "blob missing", _caffe(weights=_layers(conv=[conv_w])), EXIT_INVALID,
                "conv"),
        BadCase("caffe", "extra blob", _caffe(weights=_layers(conv=[conv_w, conv_b, conv_b])),
                EXIT_INVALID, "conv"),
        BadCase("caffe", "blob shape mismatch",
                _caffe(weights=_layers(conv=[np.ones((4, 3, 5, 5)), conv_b])), EXIT_INVALID,
                "conv"),
        BadCase("caffe", "blob data shorter than shape",
                _caffe(weights=_blob_with_wrong_data_count()), EXIT_UNREADABLE, "stores 10 values"),
        BadCase("caffe", "bottom without producer",
                _caffe(_proto_with('bottom: "conv" top: "conv" }', 'bottom: "ghost" top: "r" }')),
                EXIT_INVALID, "ghost"),
        BadCase("caffe", "layers in a cycle",
                _caffe(_proto_with('bottom: "data" top: "conv"', 'bottom: "prob" top: "conv"')),
                EXIT_INVALID, "prob"),
        BadCase("caffe", "input dim 2^40",
                _caffe(_proto_with("dim: 2 dim: 3", f"dim: {HUGE} dim: 3")), EXIT_INVALID, "data"),
        BadCase("caffe", "negative input dim",
                _caffe(_proto_with("dim: 2 dim: 3", "dim: -2 dim: 3")), EXIT_INVALID, "data"),
        BadCase("caffe", "Reshape target 2^40",
                _caffe(_proto_with(reshape[0], reshape[1] % f"dim: {HUGE} dim: -1")),
                EXIT_INVALID, "flat"),
        BadCase("caffe", "Reshape negative target",
                _caffe(_proto_with(reshape[0], reshape[1] % "dim: 2 dim: -7")), EXIT_INVALID,
                "flat"),
        BadCase("caffe", "Reshape count mismatch",
                _caffe(_proto_with(reshape[0], reshape[1] % "dim: 2 dim: 49")), EXIT_INVALID,
                "flat"),
    ]
    for frac in TRUNCATE_FRACTIONS:
        cut = int(len(valid) * frac)
        cases.append(BadCase("caffe", f"caffemodel truncated at {cut} of {len(valid)}",
                             _caffe(weights=valid[:cut]), EXIT_UNREADABLE, "caffemodel"))
    text = CAFFE_PROTOTXT.encode()
    for frac in (0.1, 0.35, 0.5, 0.75, 0.95):
        cut = int(len(text) * frac)
        cases.append(BadCase("caffe", f"prototxt truncated at {cut} of {len(text)}",
                             _caffe(text[:cut]), EXIT_UNREADABLE, "deploy.prototxt"))
    return cases


def all_cases() -> list[BadCase]:
    return onnx_cases() + tf_cases() + caffe_cases()
