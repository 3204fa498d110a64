"""The model's metadata_props keys (one home for every key the converter writes), how a value
is written under them, and the one reader of each structured value (JSON a file may hold in any
shape: every value is checked here before the tool uses it, so a malformed one is an unreadable
input naming its key)."""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ModelLoadError

CONVERTER = "nhwc-onnx"  # the value of KEY_CONVERTER in a file this tool wrote
KEY_CONVERTER = "converter"
KEY_CONVERTER_VERSION = "converter_version"
KEY_SOURCE_FRAMEWORK = "source_framework"
KEY_SOURCE_FILE = "source_file"
KEY_SOURCE_WEIGHTS = "source_weights"  # Caffe: the .caffemodel read
KEY_SOURCE_TRANSFORM = "source_transform_param"  # Caffe data layers' transform, recorded only
KEY_OPTIONS = "options"
KEY_BATCH = "batch"  # a symbolic batch: its name and the inputs and outputs that carry it
KEY_IO_PERMUTATIONS = "io_permutations"
KEY_SOURCE_NAMES = "source_names"
KEY_REQUESTED_OUTPUTS = "requested_outputs"
KEY_PREPROCESSING = "preprocessing"


def encode_io_permutations(perms: Mapping[str, Sequence[int]]) -> str:
    """The value of ``KEY_IO_PERMUTATIONS``: graph input/output name -> the permutation of its
    source axes that is stored, as compact JSON with the names sorted."""
    return json.dumps({k: [int(i) for i in p] for k, p in perms.items()}, sort_keys=True,
                      separators=(",", ":"))


def _malformed(key: str, expected: str) -> ModelLoadError:
    return ModelLoadError(f"metadata '{key}' is malformed: expected {expected}")


def _json_object(key: str, raw: str | None, expected: str) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise _malformed(key, f"JSON, {expected}") from None
    if not isinstance(value, dict):
        raise _malformed(key, expected)
    return value


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def read_io_permutations(raw: str | None) -> dict[str, list[int]]:
    """``KEY_IO_PERMUTATIONS``: name -> a permutation of 0..rank-1."""
    expected = "an object NAME -> a permutation of 0..rank-1 (a list of whole numbers)"
    perms = _json_object(KEY_IO_PERMUTATIONS, raw, expected)
    for perm in perms.values():
        if not isinstance(perm, list) or not all(_is_int(i) for i in perm) \
                or sorted(perm) != list(range(len(perm))):
            raise _malformed(KEY_IO_PERMUTATIONS, expected)
    return {name: list(perm) for name, perm in perms.items()}


def read_source_names(raw: str | None) -> dict[str, str]:
    """``KEY_SOURCE_NAMES``: a renamed graph input/output -> its name in the source."""
    expected = "an object NAME -> the name in the source (text)"
    names = _json_object(KEY_SOURCE_NAMES, raw, expected)
    if not all(isinstance(v, str) for v in names.values()):
        raise _malformed(KEY_SOURCE_NAMES, expected)
    return dict(names)


def read_preprocessing(raw: str | None) -> dict[str, dict[str, Any]]:
    """``KEY_PREPROCESSING``: image input -> {"mean": [numbers], "std": [numbers],
    "reverse_channels": bool}, what the model embeds (--mean, --std, --reverse-channels).
    Files of 0.1.0 held Caffe's transform_param under the key, as a list: nothing embedded."""
    expected = ('an object NAME -> {"mean": [numbers], "std": [numbers], '
                '"reverse_channels": true or false}')
    if raw:
        try:
            if isinstance(json.loads(raw), list):
                return {}
        except (ValueError, RecursionError):
            pass  # reported below
    steps = _json_object(KEY_PREPROCESSING, raw, expected)

    def numbers(values) -> bool:
        return isinstance(values, list) and len(values) > 0 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            for x in values)

    for step in steps.values():
        if not isinstance(step, dict) or not numbers(step.get("mean")) \
                or not numbers(step.get("std")) or 0 in step["std"] \
                or not isinstance(step.get("reverse_channels", False), bool):
            raise _malformed(KEY_PREPROCESSING, expected)
    return {name: {"mean": [float(x) for x in step["mean"]],
                   "std": [float(x) for x in step["std"]],
                   "reverse_channels": step.get("reverse_channels", False)}
            for name, step in steps.items()}


# The structured keys a dialect file may hold, each with its reader.
READERS = {KEY_IO_PERMUTATIONS: read_io_permutations, KEY_SOURCE_NAMES: read_source_names,
           KEY_PREPROCESSING: read_preprocessing}


def check_model_metadata(model) -> None:
    """Read every structured key of ``model`` (a dialect model just read) and check it against
    the graph: a permutation has the rank of its input/output, a mean or std one value or
    one per channel of its (NHWC) image input. ModelLoadError names the key otherwise."""
    io = {v.name: v for v in (*model.graph.inputs, *model.graph.outputs)}
    for name, perm in model.io_permutations.items():
        v = io.get(name)
        if v is not None and v.shape is not None and len(v.shape) != len(perm):
            raise ModelLoadError(f"metadata '{KEY_IO_PERMUTATIONS}' is malformed: '{name}' has "
                                 f"rank {len(v.shape)}, its permutation {len(perm)} axes")
    read_source_names(model.metadata.get(KEY_SOURCE_NAMES))
    inputs = {v.name: v for v in model.graph.inputs}
    for name, step in read_preprocessing(model.metadata.get(KEY_PREPROCESSING)).items():
        v = inputs.get(name)
        if v is None or v.shape is None or len(v.shape) != 4:
            raise ModelLoadError(f"metadata '{KEY_PREPROCESSING}' is malformed: '{name}' is "
                                 "not an image input (rank 4) of the model")
        channels = v.shape[-1]
        for what in ("mean", "std"):
            if len(step[what]) not in (1, channels):
                raise ModelLoadError(
                    f"metadata '{KEY_PREPROCESSING}' is malformed: {len(step[what])} {what} "
                    f"values for '{name}', which has {channels} channels")
