"""Where layer weights come from: a .caffemodel (matched by layer name), blobs written in the
prototxt itself, or seeded random values for converting a bare prototxt (``--weights random``).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...errors import ConversionContext, InvalidModelError, UsageError, located
from . import caffe_pb2 as pb
from .wire import StoredLayer, read_caffemodel

if TYPE_CHECKING:
    from .calibration import Calibration

# --weights random budget, in float32 elements: VGG16's largest blob is 103 M (2^26.6).
MAX_RANDOM_BLOB = 1 << 28  # 1 GiB
MAX_RANDOM_TOTAL = 1 << 29  # 2 GiB


@dataclass(frozen=True)
class BlobSpec:
    """The blob a converter expects: its shape and what it means (for random values)."""

    shape: tuple[int, ...]
    kind: str = "weight"  # weight | bias | mean | var | scale_factor | gamma | beta | slope
    fan_in: int = 1


def _same_up_to_ones(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return tuple(d for d in a if d != 1) == tuple(d for d in b if d != 1)


class WeightSource:
    def __init__(self, stored: list[StoredLayer] | None, origin: str, seed: int = 0,
                 random: bool = False, placeholder: bool = False):
        self.origin = origin
        self.random = random
        self.placeholder = placeholder
        self.seed = seed
        self._rng: np.random.Generator | None = None  # made on first use: slow to import
        self.by_name: dict[str, StoredLayer] = {}
        for layer in stored or []:
            self.by_name[layer.name] = layer  # a later copy wins, as in Caffe
        self.generated: dict[str, list[np.ndarray]] = {}  # what random mode produced
        self.random_total = 0  # elements generated so far
        self.used: set[str] = set()
        # random mode: the forward pass that calibrates (calibration.py)
        self.calibration: Calibration | None = None

    @classmethod
    def placeholders(cls) -> WeightSource:
        """Zero weights of every expected shape, for a conversion run only to find every layer
        that cannot be converted (the caffemodel is not read for a model that is refused)."""
        return cls(None, "placeholder weights", placeholder=True)

    @classmethod
    def from_option(cls, weights: str | None, seed: int) -> WeightSource:
        if weights == "random":
            return cls(None, "random weights", seed, random=True)
        if weights:
            return cls(read_caffemodel(weights), os.fspath(weights))
        return cls(None, "")

    def blobs(self, layer: pb.LayerParameter, specs: list[BlobSpec]) -> list[np.ndarray]:
        """The layer's blobs as float32 arrays of exactly the expected shapes."""
        if self.placeholder:
            for spec in specs:
                if math.prod(spec.shape) > MAX_RANDOM_BLOB:
                    raise InvalidModelError(
                        f"implies a weight blob of shape {list(spec.shape)}: refused as absurd")
            return [np.zeros(spec.shape, np.float32) for spec in specs]  # untouched pages: free
        if self.random:
            self._check_random_budget(layer, specs)
            earlier = self.generated.get(layer.name)
            if earlier is not None and [a.shape for a in earlier] == [s.shape for s in specs]:
                return earlier  # layers sharing a name share weights, as a caffemodel would
            arrays = None
            if self.calibration is not None and layer.type == "BatchNorm":
                arrays = self.calibration.batchnorm_blobs(layer, specs[0].shape[0])
            if arrays is None:
                arrays = [self._random(spec) for spec in specs]
            self.generated[layer.name] = arrays
            return arrays
        if layer.name in self.by_name:
            stored = self.by_name[layer.name].blobs
            where = self.origin
        elif layer.blobs:
            stored = [_blob_from_proto(b) for b in layer.blobs]
            where = "the prototxt"
        elif not self.origin:
            # a usage error keeps its message as written: it names the layer itself
            raise located(UsageError, ConversionContext(layer.name, layer.type, "caffe"),
                          "needs weights: pass a .caffemodel with --weights, or --weights "
                          "random to check convertibility")
        else:
            raise InvalidModelError(
                f"has no weights in {where_of(self.origin)} (the caffemodel does not match "
                "this prototxt)")
        self.used.add(layer.name)
        if len(stored) != len(specs):
            raise InvalidModelError(
                f"has {len(stored)} blob(s) in {where}, the prototxt implies {len(specs)}")
        out = []
        for i, (blob, spec) in enumerate(zip(stored, specs)):
            shape = tuple(int(d) for d in blob.shape)
            if shape != spec.shape:
                if blob.size != int(np.prod(spec.shape)) or not _same_up_to_ones(shape, spec.shape):
                    raise InvalidModelError(
                        f"blob {i} has shape {list(shape)} "
                        f"in {where}, the prototxt implies {list(spec.shape)}")
                blob = blob.reshape(spec.shape)
            out.append(blob if blob.dtype == np.float32 else blob.astype(np.float32))
        return out

    def _check_random_budget(self, layer: pb.LayerParameter, specs: list[BlobSpec]) -> None:
        """Refuse to invent absurd amounts of weights (a typo'd num_output, a fuzzed file)."""
        count = sum(math.prod(spec.shape) for spec in specs)
        self.random_total += count
        if count > MAX_RANDOM_BLOB or self.random_total > MAX_RANDOM_TOTAL:
            raise InvalidModelError(
                f"would need {count * 4 / 2**30:.1f} GiB of "
                f"random weights ({self.random_total * 4 / 2**30:.1f} GiB so far); the limit "
                f"for --weights random is {MAX_RANDOM_TOTAL * 4 / 2**30:.0f} GiB")

    def _random(self, spec: BlobSpec) -> np.ndarray:
        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        rng, shape = self._rng, spec.shape
        a: np.ndarray  # float32 or float64: made float32 on return
        if spec.kind == "weight":
            # He-scaled uniform values (variance 2 / fan_in): 3x cheaper than normal ones,
            # which matters for VGG's 138 M weights.
            a = rng.random(shape, dtype=np.float32)
            a -= np.float32(0.5)
            a *= np.float32(2.0 * np.sqrt(3.0) * np.sqrt(2.0 / max(spec.fan_in, 1)))
        elif spec.kind in ("bias", "beta", "mean"):
            a = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.1)
        elif spec.kind == "var":
            a = rng.uniform(0.5, 1.5, shape)
        elif spec.kind == "gamma":
            # Around 1: BatchNorm statistics come from the calibration's forward pass, so a
            # normalised map keeps about unit scale through a Scale layer.
            a = rng.uniform(0.5, 1.5, shape)
        elif spec.kind == "slope":
            a = rng.uniform(0.0, 0.5, shape)
        elif spec.kind == "scale_factor":
            a = np.ones(shape)
        else:
            a = rng.standard_normal(shape, dtype=np.float32)
        return np.ascontiguousarray(a, dtype=np.float32)


def where_of(origin: str) -> str:
    return origin or "the prototxt"


def _blob_from_proto(blob: pb.BlobProto) -> np.ndarray:
    if blob.HasField("shape"):
        shape = [int(d) for d in blob.shape.dim]
    elif blob.num or blob.channels or blob.height or blob.width:
        shape = [blob.num, blob.channels, blob.height, blob.width]
    else:
        shape = [len(blob.data) or len(blob.double_data)]
    data = np.asarray(blob.data if len(blob.data) else blob.double_data, dtype=np.float32)
    if data.size != int(np.prod(shape)):
        raise InvalidModelError(
            f"a blob in the prototxt declares shape {shape} but holds {data.size} values")
    return data.reshape(shape)
