"""Benchmark models, made locally with seeded random weights (nothing is downloaded).

Each maker writes its files under the cache folder (``benchmarks/.cache`` by default) once and
reuses them afterwards; the weights are seeded, so the same seed gives the same files.

    .venv/bin/python benchmarks/models.py            # make every model that can be made here
    .venv/bin/python benchmarks/models.py --list     # what exists, sizes, why one is missing

Models:
- keras_mobilenetv2, keras_resnet50, keras_vgg16: ``keras.applications`` with ``weights=None``,
  batch 1, frozen to a GraphDef .pb with ``convert_variables_to_constants_v2``.
- caffe_resnet50, caffe_vgg16: the public deploy prototxts (copied at run time from a corpus
  folder, never committed) plus a .caffemodel of seeded random blobs.
- onnx_resnet50: ResNet-50 (v1.5: the stride sits on the 3x3 conv) built node by node with
  ``onnx.helper`` in NCHW, Conv without bias + BatchNormalization + Relu, as PyTorch exports it
  without constant folding; 25.6 M parameters, about 100 MB.
- onnx_big: the scale case: nine 8192x8192 Gemm layers (2.4 GB of weights) stored as ONNX
  external data; written layer by layer, so making it needs little memory.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or imported
from caffe_models import ModelUnavailable, make_caffe

HERE = Path(__file__).resolve().parent
DEFAULT_CACHE = HERE / ".cache"
DEFAULT_CORPUS = Path(os.environ.get("NHWC_BENCH_CORPUS", "/work/shared/corpus"))
SEED = 0


@dataclass
class BenchModel:
    """One benchmark model: its files, and what an anchor converter needs to know about it."""

    name: str
    framework: str  # tf | caffe | onnx
    source: str = ""  # the file handed to the converters
    weights: str = ""  # caffe: the .caffemodel
    inputs: list[str] = field(default_factory=list)  # graph input names (tf2onnx needs them)
    outputs: list[str] = field(default_factory=list)
    bytes: int = 0  # size of source + weights (+ external data)
    weight_bytes: int = 0
    available: bool = True
    reason: str = ""  # why not available

    def to_dict(self) -> dict:
        return asdict(self)


def _file_bytes(*paths: str | Path) -> int:
    return sum(Path(p).stat().st_size for p in paths if p and Path(p).exists())


def _meta_path(cache: Path, name: str) -> Path:
    return cache / name / "meta.json"


def _cached(cache: Path, name: str) -> BenchModel | None:
    meta = _meta_path(cache, name)
    if not meta.exists():
        return None
    model = BenchModel(**json.loads(meta.read_text()))
    needed = [model.source] + ([model.weights] if model.weights else [])
    return model if all(Path(p).exists() for p in needed) else None


def _remember(cache: Path, model: BenchModel) -> BenchModel:
    meta = _meta_path(cache, model.name)
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps(model.to_dict(), indent=2))
    return model


# -- Keras -> frozen GraphDef ---------------------------------------------------------------------

KERAS_APPS = {
    "keras_mobilenetv2": "MobileNetV2",
    "keras_resnet50": "ResNet50",
    "keras_vgg16": "VGG16",
}


def make_keras(name: str, folder: Path, seed: int = SEED) -> BenchModel:
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    tf.keras.utils.set_random_seed(seed)
    app = getattr(tf.keras.applications, KERAS_APPS[name])
    net = app(weights=None, input_shape=(224, 224, 3))
    spec = tf.TensorSpec([1, 224, 224, 3], tf.float32, name="input")
    concrete = tf.function(lambda x: net(x, training=False)).get_concrete_function(spec)
    frozen = convert_variables_to_constants_v2(concrete)
    graph_def = frozen.graph.as_graph_def()
    path = folder / f"{name}.pb"
    path.write_bytes(graph_def.SerializeToString(deterministic=True))
    inputs = [t.name for t in frozen.inputs]
    outputs = [t.name for t in frozen.outputs]
    size = _file_bytes(path)
    return BenchModel(name, "tf", str(path), inputs=inputs, outputs=outputs, bytes=size,
                      weight_bytes=size)


# -- ONNX ResNet-50 (NCHW) -----------------------------------------------------------------------


class _OnnxBuilder:
    """Appends nodes and seeded random initializers to lists, one layer at a time."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv_bn(self, x: str, name: str, cin: int, cout: int, k: int, stride: int,
                relu: bool = True) -> str:
        from onnx import helper

        fan_in = cin * k * k
        w = self.rng.standard_normal((cout, cin, k, k), dtype=np.float32) * np.sqrt(2.0 / fan_in)
        self.nodes.append(helper.make_node(
            "Conv", [x, self.const(f"{name}.weight", w)], [f"{name}.conv"], name=name,
            kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
        bn = [self.const(f"{name}.bn.{p}", a) for p, a in (
            ("scale", self.rng.uniform(0.5, 1.5, cout)),
            ("bias", self.rng.standard_normal(cout) * 0.1),
            ("mean", self.rng.standard_normal(cout) * 0.1),
            ("var", self.rng.uniform(0.5, 1.5, cout)))]
        out = f"{name}.bn"
        self.nodes.append(helper.make_node("BatchNormalization", [f"{name}.conv"] + bn, [out],
                                           name=f"{name}.bn", epsilon=1e-5))
        if relu:
            self.nodes.append(helper.make_node("Relu", [out], [f"{name}.relu"],
                                               name=f"{name}.relu"))
            out = f"{name}.relu"
        return out


def make_onnx_resnet50(folder: Path, seed: int = SEED) -> BenchModel:
    import onnx
    from onnx import TensorProto, helper

    b = _OnnxBuilder(seed)
    x = b.conv_bn("input", "stem", 3, 64, 7, 2)
    b.nodes.append(helper.make_node("MaxPool", [x], ["stem.pool"], name="stem.pool",
                                    kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = "stem.pool", 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512)), start=1):
        for block in range(blocks):
            name = f"layer{stage}.{block}"
            stride = 2 if block == 0 and stage > 1 else 1
            y = b.conv_bn(x, f"{name}.conv1", cin, width, 1, 1)
            y = b.conv_bn(y, f"{name}.conv2", width, width, 3, stride)
            y = b.conv_bn(y, f"{name}.conv3", width, width * 4, 1, 1, relu=False)
            skip = x if block else b.conv_bn(x, f"{name}.downsample", cin, width * 4, 1, stride,
                                             relu=False)
            b.nodes.append(helper.make_node("Add", [y, skip], [f"{name}.add"], name=f"{name}.add"))
            b.nodes.append(helper.make_node("Relu", [f"{name}.add"], [f"{name}.out"],
                                            name=f"{name}.out"))
            x, cin = f"{name}.out", width * 4
    b.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"], name="pool"))
    b.nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flat", axis=1))
    fc_w = b.rng.standard_normal((1000, 2048), dtype=np.float32) * np.sqrt(1.0 / 2048)
    b.nodes.append(helper.make_node(
        "Gemm", ["flat", b.const("fc.weight", fc_w), b.const("fc.bias", np.zeros(1000))],
        ["logits"], name="fc", transB=1))
    graph = helper.make_graph(
        b.nodes, "resnet50_nchw",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="nhwc-onnx-benchmarks")
    model.ir_version = 8
    path = folder / "onnx_resnet50.onnx"
    onnx.save(model, str(path))
    size = _file_bytes(path)
    return BenchModel("onnx_resnet50", "onnx", str(path), inputs=["input"], outputs=["logits"],
                      bytes=size, weight_bytes=sum(len(t.raw_data) for t in b.inits))


# -- the scale case: > 2 GB of weights as external data ------------------------------------------

BIG_WIDTH = 8192
BIG_LAYERS = 9  # 9 x 8192 x 8192 x 4 bytes = 2.42e9 bytes > 2 GiB


def make_onnx_big(folder: Path, seed: int = SEED, width: int = BIG_WIDTH,
                  layers: int = BIG_LAYERS) -> BenchModel:
    """Gemm+Relu chain whose weights are written straight into the external-data file."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    data_name = "onnx_big.onnx.data"
    data_path = folder / data_name
    inits, nodes, offset, x = [], [], 0, "input"
    with open(data_path, "wb") as data:
        for i in range(layers):
            for tname, shape in ((f"fc{i}.weight", (width, width)), (f"fc{i}.bias", (width,))):
                tensor = TensorProto(name=tname, data_type=TensorProto.FLOAT, dims=list(shape))
                length = 0
                rows = max(1, (16 << 20) // (4 * width))  # ~16 MB chunks keep memory flat
                for start in range(0, shape[0], rows):
                    chunk_shape = (min(rows, shape[0] - start),) + shape[1:]
                    chunk = rng.standard_normal(chunk_shape, dtype=np.float32)
                    chunk *= np.float32(np.sqrt(1.0 / width))
                    data.write(chunk.tobytes())
                    length += chunk.nbytes
                tensor.data_location = TensorProto.EXTERNAL
                for key, value in (("location", data_name), ("offset", str(offset)),
                                   ("length", str(length))):
                    entry = tensor.external_data.add()
                    entry.key, entry.value = key, value
                offset += length
                inits.append(tensor)
            nodes.append(helper.make_node("Gemm", [x, f"fc{i}.weight", f"fc{i}.bias"],
                                          [f"fc{i}"], name=f"fc{i}", transB=1))
            nodes.append(helper.make_node("Relu", [f"fc{i}"], [f"relu{i}"], name=f"relu{i}"))
            x = f"relu{i}"
    graph = helper.make_graph(
        nodes, "big_gemm_chain",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="nhwc-onnx-benchmarks")
    model.ir_version = 8
    path = folder / "onnx_big.onnx"
    path.write_bytes(model.SerializeToString())
    return BenchModel("onnx_big", "onnx", str(path), inputs=["input"], outputs=[x],
                      bytes=_file_bytes(path, data_path), weight_bytes=offset)


# -- registry ------------------------------------------------------------------------------------

MODEL_NAMES = ("keras_mobilenetv2", "keras_resnet50", "keras_vgg16", "caffe_resnet50",
               "caffe_vgg16", "onnx_resnet50", "onnx_big")


def make(name: str, cache: Path = DEFAULT_CACHE, corpus: Path = DEFAULT_CORPUS,
         seed: int = SEED) -> BenchModel:
    """The model's files (made now unless cached); ``available=False`` says why it cannot be."""
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown benchmark model {name!r}; known: {', '.join(MODEL_NAMES)}")
    cached = _cached(cache, name)
    if cached is not None:
        return cached
    folder = cache / name
    folder.mkdir(parents=True, exist_ok=True)
    framework = "tf" if name.startswith("keras") else name.split("_")[0]
    try:
        if name in KERAS_APPS:
            model = make_keras(name, folder, seed)
        elif name == "onnx_resnet50":
            model = make_onnx_resnet50(folder, seed)
        elif name == "onnx_big":
            model = make_onnx_big(folder, seed)
        else:
            fields = make_caffe(name, folder, corpus, seed)
            model = BenchModel(name, "caffe", bytes=_file_bytes(fields["source"],
                                                                 fields["weights"]), **fields)
    except ModelUnavailable as exc:
        return BenchModel(name, framework, available=False, reason=str(exc))
    return _remember(cache, model)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", default=list(MODEL_NAMES))
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--list", action="store_true", help="only report cached models")
    args = parser.parse_args(argv)
    for name in args.names:
        model = _cached(args.cache, name) if args.list else make(name, args.cache, args.corpus,
                                                                 args.seed)
        if model is None:
            print(f"{name:20s} not made yet")
        elif not model.available:
            print(f"{name:20s} unavailable: {model.reason}")
        else:
            print(f"{name:20s} {model.bytes / 1e6:9.1f} MB  {model.source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
