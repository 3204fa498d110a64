"""A TensorFlow source in its own runtime (TensorFlow, the ``tf`` extra): what verification
compares a conversion with. Feeds and fetches go by source tensor names ("name" or "name:0")."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import MissingDependencyError, ModelLoadError, SourceRuntimeError
from ...options import ConvertOptions
from . import KERAS_SUFFIXES


class SourceReference:
    """A .pb runs as TensorFlow imports the file's own bytes. A Keras file runs as the loaded
    model called with training=False and a SavedModel as its signature; intermediate tensors
    (asked for by --layers and --bisect) and a cut or reshaped source (--inputs naming internal
    tensors, --input-shape) come from the graph TensorFlow itself freezes from it. The model is
    loaded, and a graph imported into a session, once per reference and set of fed shapes:
    several samples and the --layers run reuse them (importing VGG16's graph is seconds and
    gigabytes)."""

    def __init__(self, path: str, options: ConvertOptions):
        self.path = path
        self.signature = options.signature
        self._nodes: set[str] | None = None
        self._frozen = None  # the frozen graph of a Keras model or SavedModel
        self._callable: _CallableReference | None = None
        self._session: tuple[Any, Any] | None = None  # (fed shapes, session) of the graph

    def run(self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]) -> dict:
        tf = _import_tensorflow()
        if not is_graphdef_file(self.path):
            reference = self._loaded(tf)
            if reference.accepts(feeds) and all(_tensor_name(f) in reference.output_names
                                                for f in fetches):
                results = reference.run(feeds)
                return {f: results[_tensor_name(f)] for f in fetches}
        try:
            session = self._session_for(tf, feeds)
            feed = {_tensor_name(k): v for k, v in feeds.items()}
            results = session.run([_tensor_name(f) for f in fetches], feed_dict=feed)
        except (tf.errors.OpError, ValueError) as exc:  # the graph rejects the fed shapes
            text = str(getattr(exc, "message", "") or exc).strip() or type(exc).__name__
            raise SourceRuntimeError(f"TensorFlow cannot run the source '{self.path}' as "
                                     f"converted ({text.splitlines()[0]})") from None
        return dict(zip(fetches, results))

    def _session_for(self, tf, feeds: Mapping[str, np.ndarray]):
        """A session of the graph with its placeholders declared at the fed shapes."""
        key = tuple(sorted((_tensor_name(k), np.shape(v)) for k, v in feeds.items()))
        if self._session is None or self._session[0] != key:
            if self._session is not None:
                self._session[1].close()
            self._session = None
            graph_def = self.graph_def()
            _fit_placeholders(graph_def, feeds)
            graph = tf.Graph()
            with graph.as_default():
                tf.compat.v1.import_graph_def(graph_def, name="")
            del graph_def  # a .pb's parse is not kept: the session holds what it needs
            self._session = (key, tf.compat.v1.Session(graph=graph, config=_plain_config(tf)))
        return self._session[1]

    def _loaded(self, tf) -> _CallableReference:
        if self._callable is None:
            self._callable = _callable_reference(tf, self.path, self.signature)
        return self._callable

    def graph_def(self):
        """TensorFlow's own GraphDef of the source (see ``tensorflow_graph_def``): a .pb's
        parsed afresh, a frozen Keras model or SavedModel kept (freezing is the slow part)."""
        if is_graphdef_file(self.path):
            return tensorflow_graph_def(self.path, self.signature)
        if self._frozen is None:
            self._frozen = self._loaded(_import_tensorflow()).frozen_graph_def()
        return self._frozen

    def tensor_names(self) -> set[str]:
        """The nodes whose outputs ``run`` can fetch."""
        if self._nodes is None:
            self._nodes = {n.name for n in self.graph_def().node}
        return self._nodes

    def fetch_name(self, converted: str, source: str) -> str | None:
        """What ``run`` fetches for the converted model's tensor ``converted`` (recorded as
        the source's ``source``, "node" or "node:k"): that tensor, when its node exists."""
        node, _, index = source.partition(":")
        if index and not index.isdigit():
            return None
        return source if node in self.tensor_names() else None


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


def _plain_config(tf):
    """Run the graph as it is: Grappler's rewrites (constant folding above all) copied every
    weight of a frozen VGG16 several times (97 s and 7 GB before the first result)."""
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    return config


def _fit_placeholders(graph_def, feeds: Mapping[str, np.ndarray]) -> None:
    """Declare each fed placeholder with the shape fed (--input-shape and --batch change it,
    as they do in the conversion); TensorFlow refuses a feed its declared shape excludes."""
    fed = {_tensor_name(k).rpartition(":")[0]: np.shape(v) for k, v in feeds.items()}
    for node in graph_def.node:
        if node.op == "Placeholder" and node.name in fed and "shape" in node.attr:
            shape = node.attr["shape"].shape
            shape.unknown_rank = False
            del shape.dim[:]
            for d in fed[node.name]:
                shape.dim.add().size = int(d)


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

    def accepts(self, feeds: Mapping[str, np.ndarray]) -> bool:
        """Whether ``feeds`` are this callable's inputs, of shapes its signature allows (else
        the source runs as the graph TensorFlow freezes from it, cut and reshaped like the
        conversion: --inputs naming internal tensors, --input-shape)."""
        given = {_tensor_name(k): np.shape(v) for k, v in feeds.items()}
        if set(given) != set(self.input_names):
            return False
        for name, spec in zip(self.input_names, self._function.inputs):
            dims = spec.shape.as_list() if spec.shape.rank is not None else None
            shape = given[name]
            if dims is not None and (len(dims) != len(shape) or any(
                    d is not None and d != s for d, s in zip(dims, shape))):
                return False
        return True

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
                return owner(savedmodel.keras_inputs(owner, xs), training=False)

        return _CallableReference(tf, function, call, owner)
