"""A Caffe source in its own runtime (OpenCV's dnn module, the ``verify`` extra): what
verification compares a conversion with.

OpenCV runs the net the conversion converted: the TEST-phase layers the requested outputs need
(``--outputs``), its inputs declared with the shapes fed (``--input-shape``, ``--batch``; a data
layer's top becomes a declared input, which OpenCV can feed), and the weights the conversion
used (the .caffemodel, or the seeded ``--weights random`` ones, handed over in memory: no file
is written). Every tensor is fetched through an identity layer of a name of its own, added
right after the layer that computes that version of its blob: OpenCV fetches by layer name,
and the net's own names do not say which version that is (layers may share a name, OpenCV
renames a duplicate and names a Convolution after its top, a top of a multi-top layer has
no layer of its own).
OpenCV's own log lines are silenced; its errors become one message.
"""
from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import MissingDependencyError, SourceRuntimeError
from ...options import ConvertOptions
from . import caffe_pb2 as pb
from .builder import version_base
from .loader import SOURCE_LAYERS, layers_for
from .prototxt import inference_layers, read_prototxt

_FETCH_LAYER = "nhwc_onnx_fetch"  # prefix of the identity layers added to fetch a top


class SourceReference:
    def __init__(self, path: str, options: ConvertOptions):
        self.path = path
        self.options = options
        net = read_prototxt(path)
        layers = inference_layers(net)
        if options.outputs:
            layers = layers_for(layers, list(options.outputs))
        self._net = net
        self._layers = layers
        self._versions = _version_names(net, layers)
        self._weights: np.ndarray | None = None
        # (key, cv2 net, layer names) of the last run: samples reuse it
        self._loaded: tuple[Any, Any, list[str]] | None = None

    def tensor_names(self) -> set[str]:
        """The converted model's tensor names that ``run`` can fetch."""
        return set(self._versions)

    def fetch_name(self, converted: str, source: str) -> str | None:
        """What ``run`` fetches for the converted model's tensor ``converted``: the version of
        a blob that tensor holds is named after its blob or its in-place layer (see
        ``builder.version_base``), so the converted name itself says which layer computes it."""
        return converted if converted in self._versions else None

    def run(self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]) -> dict:
        cv2 = _import_cv2()
        feeds = {name: np.ascontiguousarray(value, dtype=np.float32)
                 for name, value in feeds.items()}
        unknown = [f for f in fetches if f not in self._versions]
        if unknown:
            raise SourceRuntimeError(f"the Caffe net '{self.path}' computes no blob version "
                                     f"named {', '.join(unknown)}")
        key = (tuple((n, v.shape) for n, v in sorted(feeds.items())), tuple(fetches))
        with _quiet(cv2):
            try:
                if self._loaded is None or self._loaded[0] != key:
                    self._loaded = None
                    text, layer_names = self._reference_net(feeds, fetches)
                    net = cv2.dnn.readNetFromCaffe(np.frombuffer(text, np.uint8),
                                                   self.weights())
                    # Unfused, each layer computes its own top: a fused layer's top (a
                    # BatchNorm folded into its convolution) is not there to fetch.
                    net.enableFusion(False)
                    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
                    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
                    self._loaded = (key, net, layer_names)
                _, net, layer_names = self._loaded
                for name, value in feeds.items():
                    net.setInput(value, name)
                results = net.forward(layer_names)
            except cv2.error as exc:
                raise SourceRuntimeError(
                    f"OpenCV cannot run the Caffe net '{self.path}' "
                    f"({_opencv_reason(exc)})") from None
        return {name: np.asarray(r) for name, r in zip(fetches, results)}

    def weights(self) -> np.ndarray:
        """The weights as the bytes of a .caffemodel (a view of the file when one is given)."""
        if self._weights is None:
            if self.options.weights not in (None, "random"):
                self._weights = np.memmap(self.options.weights, dtype=np.uint8, mode="r")
            else:
                self._weights = np.frombuffer(random_caffemodel(self.path, self.options),
                                              np.uint8)
        return self._weights

    def _reference_net(self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]
                       ) -> tuple[bytes, list[str]]:
        """The prototxt OpenCV runs, and the layer to fetch for each of ``fetches``."""
        from google.protobuf import text_format

        ref = pb.NetParameter()
        ref.name = self._net.name
        for name, value in feeds.items():
            ref.input.append(name)
            ref.input_shape.add().dim.extend(int(d) for d in value.shape)
        # no fetcher may take the name of a layer or a blob (OpenCV may name a layer so)
        taken = {name for layer in self._layers for name in (layer.name, *layer.top)}
        taken.update(feeds)
        extra: dict[tuple[int, int], str] = {}  # (layer position, top) -> its fetcher
        for name in fetches:
            position, index = self._versions[name][:2]
            if (position, index) not in extra:
                fetcher = f"{_FETCH_LAYER}_{len(extra)}"
                while fetcher in taken:
                    fetcher += "_"
                taken.add(fetcher)
                extra[(position, index)] = fetcher
        for position, layer in enumerate(self._layers):
            if layer.type in SOURCE_LAYERS:
                continue  # its tops are the net's declared inputs
            copy = ref.layer.add()
            copy.CopyFrom(layer)
            del copy.include[:]
            del copy.exclude[:]
            for index, top in enumerate(layer.top):
                fetch = extra.get((position, index))
                if fetch is not None:  # an identity right after the layer: this version
                    ref.layer.add(name=fetch, type="Split", bottom=[top], top=[fetch])
        layer_names = [extra[self._versions[name][:2]] for name in fetches]
        return text_format.MessageToString(ref).encode(), layer_names


def _version_names(net: pb.NetParameter, layers: list[pb.LayerParameter]
                   ) -> dict[str, tuple[int, int, int]]:
    """Converted tensor name -> (position of the layer in ``layers``, top index, number of
    tops) for every blob version a layer computes, named as the frontend's builder names them
    (``version_base``, then a suffix _1, _2 ... for a name taken, in layer order)."""
    seen: set[str] = set(net.input)
    used: set[str] = set(net.input)
    names: dict[str, tuple[int, int, int]] = {}

    def fresh(base: str) -> str:
        name, i = base, 0
        while name in used:
            i += 1
            name = f"{base}_{i}"
        used.add(name)
        return name

    for position, layer in enumerate(layers):
        if layer.type in SOURCE_LAYERS:
            tops = list(layer.top) if layer.type == "Input" else list(layer.top[:1])
            for top in tops:
                fresh(top)
                seen.add(top)
            continue
        tops = list(layer.top)
        bases = [version_base(layer, i, top in layer.bottom or top in seen)
                 for i, top in enumerate(tops)]
        for index, base in enumerate(bases):
            names[fresh(base)] = (position, index, len(tops))
        seen.update(tops)
    return names


def random_caffemodel(prototxt: str, options: ConvertOptions) -> bytes:
    """The seeded random weights the Caffe frontend used, as the bytes of a .caffemodel."""
    from .loader import random_weights
    from .writer import encode_caffemodel

    _, blobs = random_weights(prototxt, options)
    return encode_caffemodel((name, "", arrays) for name, arrays in blobs.items())


def _import_cv2():
    try:
        import cv2
    except ImportError as exc:
        raise MissingDependencyError("opencv-python-headless<5", "verify",
                                     "verifying a Caffe source") from exc
    return cv2


@contextlib.contextmanager
def _quiet(cv2):
    """No OpenCV log line reaches the user's terminal (its errors are raised instead)."""
    logging = getattr(getattr(cv2, "utils", None), "logging", None)
    if logging is None:
        yield
        return
    level = logging.getLogLevel()
    logging.setLogLevel(logging.LOG_LEVEL_SILENT)
    try:
        yield
    finally:
        logging.setLogLevel(level)


def _opencv_reason(exc: Exception) -> str:
    """The assertion of a cv2.error, without OpenCV's version and source path."""
    text = " ".join(str(exc).split())
    _, sep, rest = text.partition(" error: ")
    return rest if sep else text
