"""Fuzz case generators: one seeded mutated model (its files and options) per case number.

A case is fully determined by (format, seed, case number), so any crash replays from its
number alone (``python fuzz_harness.py FORMAT --only N``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from fuzz_mutators import mutate_bytes, mutate_message
from google.protobuf import text_format
from rel_models import CAFFE_PROTOTXT, caffe_layers, onnx_model, tf_graphdef

from nhwc_onnx.frontends.base import FrontendOptions


@dataclass
class FuzzCase:
    files: dict[str, bytes]  # file name -> content, written into one folder
    source: str  # which of the files is the source
    options: FrontendOptions
    steps: list[str] = field(default_factory=list)  # what was mutated, for the report


def _registry_names(fmt: str) -> list[str]:
    if fmt == "onnx":
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
        elif fmt == "tf":
            self.base = tf_graphdef()
        else:
            from nhwc_onnx.frontends.caffe import caffe_pb2

            self.base = text_format.Parse(CAFFE_PROTOTXT, caffe_pb2.NetParameter())
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
        return FuzzCase({"model.onnx": data}, "model.onnx", FrontendOptions(), steps)

    def _tf(self, rng: random.Random) -> FuzzCase:
        steps: list[str] = []
        as_text = rng.random() < 0.15
        name = "model.pbtxt" if as_text else "model.pb"
        if rng.random() < 0.3:
            raw = text_format.MessageToString(self.base).encode() if as_text else \
                self.base.SerializeToString()
            data = self._maybe_bytes(raw, rng, 1.0, steps)
        else:
            graph, steps = self._structural(self.base, rng)
            try:
                raw = text_format.MessageToString(graph).encode() if as_text else \
                    graph.SerializeToString()
            except (ValueError, TypeError, UnicodeError):
                raw = self.base.SerializeToString()
                name = "model.pb"
            data = self._maybe_bytes(raw, rng, 0.1, steps)
        return FuzzCase({name: data}, name, FrontendOptions(), steps)

    def _caffe(self, rng: random.Random) -> FuzzCase:
        steps: list[str] = []
        proto_text = CAFFE_PROTOTXT.encode()
        weights = self.weights_message.SerializeToString()
        target = rng.choice(["prototxt", "prototxt", "caffemodel", "caffemodel", "random"])
        if target in ("prototxt", "random"):
            if rng.random() < 0.25:
                proto_text = self._maybe_bytes(proto_text, rng, 1.0, steps)
            else:
                net, steps = self._structural(self.base, rng)
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
        options = FrontendOptions(weights="random" if target == "random" else None)
        files = {"deploy.prototxt": proto_text}
        if target != "random":
            files["weights.caffemodel"] = weights
        return FuzzCase(files, "deploy.prototxt", options, steps)
