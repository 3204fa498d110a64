"""Fuzz case generators: one seeded mutated model (its files and options) per case number.

A case is fully determined by (format, seed, case number), so any crash replays from its
number alone (``python fuzz_harness.py FORMAT --only N``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
from fuzz_mutators import mutate_bytes, mutate_message
from google.protobuf import text_format
from rel_models import (
    CAFFE_PROTOTXT,
    CAFFE_ZOO_PROTOTXT,
    caffe_layers,
    onnx_model,
    tf_graphdef,
    tf_zoo_graphdef,
)

from nhwc_onnx.options import ConvertOptions


@dataclass
class FuzzCase:
    files: dict[str, bytes]  # file name -> content, written into one folder
    source: str  # which of the files is the source
    options: ConvertOptions
    steps: list[str] = field(default_factory=list)  # what was mutated, for the report


def _registry_names(fmt: str) -> list[str]:
    if fmt in ("onnx", "onnx_ops"):
        from nhwc_onnx.frontends.onnx import REGISTRY
    elif fmt == "tf":
        from nhwc_onnx.frontends.tensorflow import REGISTRY
    else:
        from nhwc_onnx.frontends.caffe import REGISTRY
    return REGISTRY.names()


class CaseFactory:
    """Builds case ``i`` of one format; the valid base models are built once."""

    def __init__(self, fmt: str, seed: int):
        self.fmt = fmt
        self.seed = seed
        self.op_names = _registry_names(fmt)
        if fmt == "onnx":
            self.base = onnx_model()
        elif fmt == "onnx_ops":
            self.corpus = onnx_op_corpus(set(self.op_names))
        elif fmt == "tf":
            self.bases = [tf_graphdef(), tf_zoo_graphdef()]
        else:
            from nhwc_onnx.frontends.caffe import caffe_pb2

            self.base = text_format.Parse(CAFFE_PROTOTXT, caffe_pb2.NetParameter())
            self.zoo = text_format.Parse(CAFFE_ZOO_PROTOTXT, caffe_pb2.NetParameter())
            self.weights_message = self._caffemodel_message(caffe_pb2)

    @staticmethod
    def _caffemodel_message(caffe_pb2):
        from rel_models import caffemodel_bytes

        net = caffe_pb2.NetParameter()
        net.ParseFromString(caffemodel_bytes(caffe_layers()))
        return net

    def case(self, index: int) -> FuzzCase:
        rng = random.Random(f"{self.fmt}:{self.seed}:{index}")
        return getattr(self, f"_{self.fmt}")(rng)

    def _structural(self, message, rng: random.Random) -> tuple[object, list[str]]:
        copy = type(message)()
        copy.CopyFrom(message)
        ops = rng.sample(self.op_names, min(4, len(self.op_names)))
        steps = mutate_message(copy, rng, ops, count=rng.choice([1, 1, 1, 2, 3]))
        return copy, steps

    def _maybe_bytes(self, data: bytes, rng: random.Random, p: float, steps: list[str]) -> bytes:
        while rng.random() < p:
            data, what = mutate_bytes(data, rng)
            steps.append(what)
            p /= 2
        return data

    def _onnx(self, rng: random.Random) -> FuzzCase:
        steps: list[str] = []
        if rng.random() < 0.3:
            data = self._maybe_bytes(self.base.SerializeToString(), rng, 1.0, steps)
        else:
            model, steps = self._structural(self.base, rng)
            data = self._maybe_bytes(model.SerializeToString(), rng, 0.1, steps)
        return FuzzCase({"model.onnx": data}, "model.onnx", ConvertOptions(), steps)

    def _onnx_ops(self, rng: random.Random) -> FuzzCase:
        """One ONNX backend node test (an op the frontend supports) with its attributes,
        shapes or pinned constant inputs (shapes, axes, pads, scales ...) made hostile."""
        name, model, pinned = rng.choice(self.corpus)
        pinned = dict(pinned)
        steps = [name]
        if pinned and rng.random() < 0.4:
            key = rng.choice(sorted(pinned))
            pinned[key], what = _extreme_array(pinned[key], rng)
            steps.append(f"pinned {key}: {what}")
        else:
            model, done = self._structural(model, rng)
            steps += done
        options = ConvertOptions().running(constant_inputs=pinned)
        return FuzzCase({"model.onnx": model.SerializeToString()}, "model.onnx", options, steps)

    def _tf(self, rng: random.Random) -> FuzzCase:
        steps: list[str] = []
        as_text = rng.random() < 0.15
        name = "model.pbtxt" if as_text else "model.pb"
        base = rng.choice(self.bases)
        if rng.random() < 0.3:
            raw = text_format.MessageToString(base).encode() if as_text else \
                base.SerializeToString()
            data = self._maybe_bytes(raw, rng, 1.0, steps)
        else:
            graph, steps = self._structural(base, rng)
            try:
                raw = text_format.MessageToString(graph).encode() if as_text else \
                    graph.SerializeToString()
            except (ValueError, TypeError, UnicodeError):
                raw = base.SerializeToString()
                name = "model.pb"
            data = self._maybe_bytes(raw, rng, 0.1, steps)
        return FuzzCase({name: data}, name, ConvertOptions(), steps)

    def _caffe(self, rng: random.Random) -> FuzzCase:
        steps: list[str] = []
        proto_text = CAFFE_PROTOTXT.encode()
        weights = self.weights_message.SerializeToString()
        target = rng.choice(["prototxt", "prototxt", "caffemodel", "caffemodel", "random",
                             "zoo", "zoo"])
        if target in ("prototxt", "random", "zoo"):
            base = self.zoo if target == "zoo" else self.base
            if target == "zoo":
                proto_text = CAFFE_ZOO_PROTOTXT.encode()
            if rng.random() < 0.25:
                proto_text = self._maybe_bytes(proto_text, rng, 1.0, steps)
            else:
                net, steps = self._structural(base, rng)
                try:
                    proto_text = text_format.MessageToString(net).encode()
                except (ValueError, TypeError, UnicodeError):
                    steps.append("unprintable: kept the original")
        else:
            if rng.random() < 0.3:
                weights = self._maybe_bytes(weights, rng, 1.0, steps)
            else:
                net, steps = self._structural(self.weights_message, rng)
                weights = net.SerializeToString()
        steps = [f"{target}: {s}" for s in steps]
        random_weights = target in ("random", "zoo")
        options = ConvertOptions(weights="random" if random_weights else None)
        files = {"deploy.prototxt": proto_text}
        if not random_weights:
            files["weights.caffemodel"] = weights
        return FuzzCase(files, "deploy.prototxt", options, steps)


def _extreme_array(array: np.ndarray, rng: random.Random) -> tuple[np.ndarray, str]:
    """A copy of an integer (or float) constant with one element set to an extreme value."""
    out = np.array(array, copy=True)
    if out.size == 0:
        return np.zeros(rng.choice([1, 4]), out.dtype), "empty -> zeros"
    flat = out.reshape(-1)
    i = rng.randrange(flat.size)
    if out.dtype.kind in "iu":
        info = np.iinfo(out.dtype)
        pick = rng.choice([0, -1, 1 << 20, 1 << 31, 1 << 40, -(1 << 40), info.max, info.min])
        flat[i] = min(max(pick, info.min), info.max)
    elif out.dtype.kind == "f":
        flat[i] = rng.choice([0.0, -1.0, 1e6, 1e30, float("inf"), float("nan")])
    elif out.dtype.kind == "b":
        flat[i] = not flat[i]
    return out, f"[{i}] = {flat[i]!r}"


def onnx_op_corpus(supported: set[str]) -> list[tuple[str, object, dict]]:
    """(name, model, pinned non-float inputs) of every ONNX backend node test whose ops the
    frontend registers; the models are built in code by the onnx package."""
    import warnings

    from onnx import numpy_helper
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    corpus = []
    for case in cases:
        model = case.model
        if model is None or not case.data_sets:
            continue
        if not all(n.op_type in supported for n in model.graph.node):
            continue
        inits = {t.name for t in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in inits]
        pinned = {}
        for name, value in zip(names, case.data_sets[0][0]):
            if hasattr(value, "dims"):
                value = numpy_helper.to_array(value)
            if isinstance(value, np.ndarray) and value.dtype != np.float32:
                pinned[name] = value
        corpus.append((case.name, model, pinned))
    return sorted(corpus, key=lambda c: c[0])
