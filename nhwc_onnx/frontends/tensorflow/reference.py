"""A TensorFlow source in its own runtime (TensorFlow, the ``tf`` extra): what verification
compares a conversion with. Feeds and fetches go by source tensor names ("name" or "name:0")."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ...errors import MissingDependencyError, ModelLoadError
from ...options import ConvertOptions
from . import KERAS_SUFFIXES


class SourceReference:
    """A .pb runs as TensorFlow imports the file's own bytes; a Keras file or a SavedModel as
    TensorFlow loads it (see ``run_tensorflow``)."""

    def __init__(self, path: str, options: ConvertOptions):
        self.path = path
        self.signature = options.signature

    def run(self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]) -> dict:
        return run_tensorflow(self.path, feeds, fetches, self.signature)

    def tensor_names(self) -> set[str]:
        """The nodes whose outputs ``run`` can fetch."""
        return {n.name for n in tensorflow_graph_def(self.path, self.signature).node}


def _tensor_name(name: str) -> str:
    return name if ":" in name else f"{name}:0"


def _import_tensorflow():
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # its kernels have wrong strided convs
        import tensorflow as tf
    except ImportError as exc:
        raise MissingDependencyError("tensorflow-cpu", "tf",
                                     "verifying a TensorFlow source") from exc
    return tf


def is_graphdef_file(path: str) -> bool:
    """What the TensorFlow frontend reads as a GraphDef (not a SavedModel or Keras file)."""
    return not os.path.isdir(path) and not str(path).lower().endswith(KERAS_SUFFIXES)


def run_tensorflow(path: str, feeds: Mapping[str, np.ndarray], fetches: Sequence[str],
                   signature: str = "serving_default") -> dict:
    """A .pb runs as TensorFlow imports the file's own bytes. A Keras file runs as the loaded
    model called with training=False and a SavedModel as its signature; only intermediate
    tensors (asked for by bisect) come from the graph TensorFlow itself freezes."""
    tf = _import_tensorflow()
    if is_graphdef_file(path):
        return _run_graph_def(tf, tensorflow_graph_def(path, signature), feeds, fetches)
    reference = _callable_reference(tf, path, signature)
    if all(_tensor_name(f) in reference.output_names for f in fetches):
        results = reference.run(feeds)
        return {f: results[_tensor_name(f)] for f in fetches}
    return _run_graph_def(tf, reference.frozen_graph_def(), feeds, fetches)


def tensorflow_graph_def(path: str, signature: str = "serving_default"):
    """TensorFlow's own GraphDef of the source: parsed by TensorFlow from the file's bytes for a
    .pb/.pbtxt, frozen by TensorFlow for a Keras file or SavedModel (never the converter's
    parse, which moves large weights out of the message)."""
    tf = _import_tensorflow()
    if not is_graphdef_file(path):
        return _callable_reference(tf, path, signature).frozen_graph_def()
    from google.protobuf import text_format
    from google.protobuf.message import DecodeError

    graph_def = tf.compat.v1.GraphDef()
    data = Path(path).read_bytes()
    if not str(path).lower().endswith(".pbtxt"):
        try:
            graph_def.ParseFromString(data)
            return graph_def
        except DecodeError:
            graph_def.Clear()  # a text GraphDef under another name: the frontend reads those too
    try:
        text_format.Parse(data.decode("utf-8"), graph_def)
    except (UnicodeDecodeError, text_format.ParseError) as exc:
        raise ModelLoadError(f"{path}: TensorFlow cannot read it as a GraphDef ({exc})") from None
    return graph_def


def _run_graph_def(tf, graph_def, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]):
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as sess:
        feed = {_tensor_name(k): v for k, v in feeds.items()}
        results = sess.run([_tensor_name(f) for f in fetches], feed_dict=feed)
    return dict(zip(fetches, results))


class _CallableReference:
    """A Keras model or a SavedModel signature, with the graph tensor names the converter saw:
    inputs are the concrete function's placeholders, outputs its flattened results."""

    def __init__(self, tf, function, call, owner):
        self._tf = tf
        self._owner = owner  # a signature stops working once its loaded SavedModel is freed
        self._function = function
        self._call = call  # the source's own callable: flat input tensors -> nested outputs
        specs = tf.nest.flatten(function.structured_input_signature)
        self.input_names = [t.name for t in function.inputs[:len(specs)]]
        self.output_names = [t.name for t in function.outputs]
        self._frozen = None

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        given = {_tensor_name(k): v for k, v in feeds.items()}
        unknown = sorted(set(given) - set(self.input_names))
        missing = [n for n in self.input_names if n not in given]
        if unknown or missing:
            raise ModelLoadError(
                f"the source's inputs are {', '.join(self.input_names)}; the converted model "
                f"feeds {', '.join(sorted(given))} (was it converted from another source?)")
        flat = self._tf.nest.flatten(self._call([self._tf.constant(given[n])
                                                 for n in self.input_names]),
                                     expand_composites=True)
        flat = [t for t in flat if t is not None]
        if len(flat) != len(self.output_names):
            raise ModelLoadError(f"the source returned {len(flat)} outputs, its graph has "
                                 f"{len(self.output_names)}; cannot pair them by name")
        return {name: np.asarray(t) for name, t in zip(self.output_names, flat)}

    def frozen_graph_def(self):
        if self._frozen is None:
            from tensorflow.python.framework.convert_to_constants import (
                convert_variables_to_constants_v2,
            )

            self._frozen = convert_variables_to_constants_v2(self._function).graph.as_graph_def()
        return self._frozen


def _callable_reference(tf, path: str, signature: str) -> _CallableReference:
    """Loaded afresh on each call: a cached model could outlive edits to its files."""
    from . import savedmodel

    with savedmodel._quiet_native_stderr():
        if os.path.isdir(path):
            function, owner = savedmodel._saved_model_function(tf, path, signature)

            def call(xs):
                args, kwargs = tf.nest.pack_sequence_as(function.structured_input_signature, xs)
                return function(*args, **kwargs)
        else:
            function, owner = savedmodel._keras_function(tf, path)

            def call(xs):
                return owner(xs[0] if len(xs) == 1 else list(xs), training=False)

        return _CallableReference(tf, function, call, owner)
