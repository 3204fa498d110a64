"""SavedModel directories and Keras (.keras / .h5) files: freeze them with TensorFlow (imported
here, lazily, and only here), then convert the frozen GraphDef like a .pb file."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
from typing import NamedTuple

from ...errors import MissingDependencyError, ModelLoadError
from ...options import ConvertOptions
from .reader import parse_graphdef_bytes


@contextlib.contextmanager
def _quiet_native_stderr():
    """TensorFlow's C++ side prints absl/oneDNN/CPU-feature lines straight to file descriptor 2
    while it imports and loads; the converter's own messages must stay the only output."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable stderr (embedded interpreters): nothing to hide
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import tensorflow as tf
        from tensorflow.python.framework.convert_to_constants import (
            convert_variables_to_constants_v2,
        )
    except ImportError as exc:
        raise MissingDependencyError("tensorflow", "tf", "reading a SavedModel or Keras model") \
            from exc
    return tf, convert_variables_to_constants_v2


def _saved_model_function(tf, path: str, signature: str):
    if not os.path.isfile(os.path.join(path, "saved_model.pb")) and not os.path.isfile(
        os.path.join(path, "saved_model.pbtxt")
    ):
        raise ModelLoadError(f"{path}: a directory without saved_model.pb is not a SavedModel")
    try:
        loaded = tf.saved_model.load(path)
    except Exception as exc:  # noqa: BLE001 - TensorFlow raises many types for a bad folder
        raise ModelLoadError(f"{path}: cannot load the SavedModel: {_first_line(exc)}") from None
    signatures = dict(loaded.signatures)
    if signature not in signatures:
        known = ", ".join(sorted(signatures)) or "none"
        raise ModelLoadError(f"{path}: no signature '{signature}' (it has: {known})")
    return signatures[signature], loaded


def check_keras_archive(path: str) -> None:
    """A ``.keras`` file is a ZIP archive holding ``config.json``; say so before Keras does.
    (Keras 3 takes a file whose ZIP directory is missing - a truncated download - for no file
    at all: "File not found: filepath=...".) Reads only the archive's directory."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except zipfile.BadZipFile:
        raise ModelLoadError(f"{path}: cannot load the Keras model: the file is truncated or "
                             "not a .keras archive (no readable ZIP directory at its end)") \
            from None
    except OSError as exc:
        raise ModelLoadError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if "config.json" not in names:
        raise ModelLoadError(f"{path}: cannot load the Keras model: the ZIP archive holds no "
                             "config.json, so it is not a .keras model")


_TF_NODE_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/]*")


def _layer_name(tensor) -> str:
    """The name of the Keras layer that made ``tensor`` (an Input's own name for inputs)."""
    history = getattr(tensor, "_keras_history", None)
    layer = getattr(history, "operation", None) or getattr(history, "layer", None)
    return str(getattr(layer, "name", "") or getattr(tensor, "name", ""))


def keras_io_names(model) -> tuple[list[str], list[str]]:
    """The names a Keras model's user knows its inputs and outputs by: the Input layers'
    names; the keys of a dict of outputs (in the order TensorFlow flattens it: sorted) or else
    the output layers' names."""
    inputs = [_layer_name(t) for t in model.inputs]
    struct = getattr(model, "_outputs_struct", None)
    if isinstance(struct, dict) and len(struct) == len(model.outputs):
        return inputs, sorted(struct)
    return inputs, [_layer_name(t) for t in model.outputs]


def _keras_function(tf, path: str):
    import keras

    try:
        model = keras.models.load_model(path, compile=False)
    except Exception as exc:  # noqa: BLE001 - corrupt archives raise zipfile/h5py/... errors
        raise ModelLoadError(f"{path}: cannot load the Keras model: {_first_line(exc)}") from None
    # The placeholders are named after the Keras inputs ("img"), where TensorFlow takes the
    # name as it is; else input / input_<i>.
    names, _ = keras_io_names(model)
    specs = [tf.TensorSpec(t.shape, t.dtype, name=name if _TF_NODE_NAME.fullmatch(name)
                           and names.count(name) == 1 else
                           f"input_{i}" if len(model.inputs) > 1 else "input")
             for i, (t, name) in enumerate(zip(model.inputs, names))]

    def call(*xs):
        return model(keras_inputs(model, xs), training=False)

    return tf.function(call).get_concrete_function(*specs), model


def keras_inputs(model, flat) -> object:
    """The flat input tensors (in the order of ``model.inputs``) in the structure the model
    takes (one tensor, a list, a dict by input name): Keras warns, or fails, on another."""
    import keras

    flat = list(flat)
    try:
        structure = model.input
    except (AttributeError, ValueError):  # a subclassed model: no declared structure
        return flat[0] if len(flat) == 1 else flat
    return keras.tree.pack_sequence_as(structure, flat)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _signature_io_names(tf, function) -> tuple[list[str], list[str]]:
    """A SavedModel signature's input and output keys, in the order of its flat tensors
    (TensorFlow flattens a dict in key order)."""
    args, kwargs = function.structured_input_signature
    inputs = [""] * len(tf.nest.flatten(args)) + sorted(kwargs)  # positional: no key
    outputs = function.structured_outputs
    return inputs, sorted(outputs) if isinstance(outputs, dict) else []


class FrozenModel(NamedTuple):
    graph_def: object
    buffer: object  # weights lifted out of the GraphDef (wire.py)
    label: str
    options: ConvertOptions  # naming the function's outputs when the caller named none
    # source tensor ("name:0") -> the name users know it by (a Keras layer, a signature key)
    user_names: dict[str, str]


def load_frozen(path: str, options: ConvertOptions) -> FrozenModel:
    """A SavedModel directory or a Keras file, frozen to a GraphDef by TensorFlow."""
    if not os.path.exists(path):
        raise ModelLoadError(f"{path}: no such file or directory")
    with _quiet_native_stderr():
        tf, freeze = _tensorflow()
        if os.path.isdir(path):
            function, _owner = _saved_model_function(tf, path, options.signature)
            input_names, output_names = _signature_io_names(tf, function)
        else:
            function, _owner = _keras_function(tf, path)
            input_names, output_names = keras_io_names(_owner)
        try:
            frozen = freeze(function)
        except Exception as exc:  # noqa: BLE001 - freezing fails in many ways on resource ops
            raise ModelLoadError(f"{path}: cannot freeze the model: {_first_line(exc)}") \
                from None
        data = frozen.graph.as_graph_def().SerializeToString()
        user_names = _pair(function.inputs, input_names) | _pair(frozen.outputs, output_names)
    label = os.path.basename(os.path.normpath(path))
    graph_def, buffer = parse_graphdef_bytes(data, label)
    if not options.outputs:
        options = dataclasses.replace(options, outputs=tuple(t.name for t in frozen.outputs))
    else:  # --outputs may name an output as users know it ("probs", "scores")
        tensors = {user: tensor for tensor, user in user_names.items()}
        options = dataclasses.replace(options, outputs=tuple(tensors.get(n, n)
                                                             for n in options.outputs))
    return FrozenModel(graph_def, buffer, label, options, user_names)


def _pair(tensors, names: list[str]) -> dict[str, str]:
    """Flat tensors -> their user names (the first ``len(names)`` tensors: a function's
    inputs end with its captured variables)."""
    if len(names) > len(tensors):
        return {}
    return {t.name: name for t, name in zip(tensors, names) if name}
