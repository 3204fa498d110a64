"""A Caffe source in its own runtime (OpenCV's dnn module, the ``verify`` extra): what
verification compares a conversion with. Feeds and fetches go by blob and layer names."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ...errors import MissingDependencyError
from ...options import ConvertOptions


class SourceReference:
    """Without a .caffemodel (``--weights random`` or none) the net runs with the seeded random
    weights the frontend used, written where OpenCV can read them."""

    def __init__(self, path: str, options: ConvertOptions):
        self.path = path
        self.options = options
        self._weights = options.weights if options.weights not in (None, "random") else None

    def weights(self) -> str:
        if self._weights is None:
            self._weights = _random_caffemodel(self.path, self.options)
        return self._weights

    def _net(self):
        try:
            import cv2
        except ImportError as exc:
            raise MissingDependencyError("opencv-python-headless<5", "verify",
                                         "verifying a Caffe source") from exc
        net = cv2.dnn.readNetFromCaffe(self.path, self.weights())
        net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
        return net

    def run(self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]) -> dict:
        net = self._net()
        for name, value in feeds.items():
            net.setInput(np.ascontiguousarray(value, dtype=np.float32), name)
        results = net.forward(list(fetches))
        return {name: np.asarray(r) for name, r in zip(fetches, results)}

    def tensor_names(self) -> set[str]:
        """The layers ``run`` can fetch."""
        return set(self._net().getLayerNames())


def _random_caffemodel(prototxt: str, options: ConvertOptions) -> str:
    """The seeded random weights the Caffe frontend used, as a .caffemodel file."""
    from .loader import random_weights
    from .writer import write_caffemodel

    _, blobs = random_weights(prototxt, options)
    out = Path(tempfile.gettempdir()) / f"nhwc_onnx_verify_{os.getpid()}_{options.seed}.caffemodel"
    write_caffemodel(out, [(name, "", arrays) for name, arrays in blobs.items()])
    return str(out)
