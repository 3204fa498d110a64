"""An ONNX source in its own runtime (onnxruntime, from the ``verify`` extra): what
verification compares a conversion with. Feeds and fetches go by source tensor names.

The model onnxruntime runs is the source cut the way the conversion cut it: its graph inputs
are exactly the tensors fed (a graph input, or an internal tensor named with ``--inputs``), with
the shapes fed (``--input-shape`` and ``--batch`` change them), its outputs exactly the tensors
fetched, and only the nodes between them are kept. Graph inputs pinned with
``constant_inputs`` become initializers, as they are constants in the conversion.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import MissingDependencyError, SourceRuntimeError
from ...options import ConvertOptions


class SourceReference:
    def __init__(self, path: str, options: ConvertOptions):
        self.path = path
        self.constants = dict(options.constant_inputs)
        self._names: set[str] | None = None
        # (key, session) of the last run: samples reuse it
        self._session: tuple[Any, Any] | None = None

    def run(self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]) -> dict:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingDependencyError("onnxruntime", "verify",
                                         "verifying an ONNX source") from exc
        feeds = {name: np.asarray(value) for name, value in feeds.items()}
        key = (tuple((n, v.shape, v.dtype.str) for n, v in sorted(feeds.items())),
               tuple(fetches))
        if self._session is None or self._session[0] != key:
            self._session = None  # free the previous session before building the next
            model = self._cut(feeds, fetches)
            options = ort.SessionOptions()
            # fatal only: onnxruntime's own log lines (colours, raw node names) never reach the
            # terminal; its error comes back as an exception, said in our words
            options.log_severity_level = 4
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            try:
                session = ort.InferenceSession(model.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
            except Exception as exc:
                raise SourceRuntimeError(
                    f"onnxruntime cannot run the source '{self.path}' as converted "
                    f"({_first_line(exc)})") from exc
            self._session = (key, session)
        session = self._session[1]
        try:
            quiet = ort.RunOptions()
            quiet.log_severity_level = 4
            results = session.run(list(fetches), feeds, quiet)
        except Exception as exc:
            raise SourceRuntimeError(f"onnxruntime failed running the source '{self.path}' "
                                     f"({_first_line(exc)})") from exc
        return dict(zip(fetches, results))

    def _cut(self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]):
        """The source model reduced to what computes ``fetches`` from ``feeds``."""
        import onnx
        from onnx import helper, numpy_helper

        model = onnx.load(self.path)
        model.ir_version = min(model.ir_version, 10)
        g = model.graph
        declared = {i.name: i for i in g.input}
        initializers = {t.name for t in g.initializer}
        for name, array in self.constants.items():
            if name not in feeds and name not in initializers:
                g.initializer.append(numpy_helper.from_array(np.asarray(array), name))
                initializers.add(name)
        kept = _needed_nodes(list(g.node), set(fetches), set(feeds))
        del g.node[:]
        g.node.extend(kept)
        reshaped = any(name not in declared or _declared_shape(declared[name]) != v.shape
                       for name, v in feeds.items())
        inputs = [helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
            for name, value in feeds.items()]
        inputs += [i for i in g.input if i.name in initializers and i.name not in feeds]
        del g.input[:]
        g.input.extend(inputs)
        del g.output[:]
        for name in fetches:
            g.output.add().name = name  # onnxruntime infers the type
        if reshaped:
            del g.value_info[:]  # inferred for the declared shapes: stale for the fed ones
        return model

    def tensor_names(self) -> set[str]:
        """The tensors ``run`` can fetch."""
        if self._names is None:
            import onnx

            m = onnx.load(self.path, load_external_data=False)
            self._names = {o for n in m.graph.node for o in n.output if o}
        return self._names

    def fetch_name(self, converted: str, source: str) -> str | None:
        """What ``run`` fetches for the converted model's tensor ``converted`` (recorded as
        the source's ``source``): that source tensor, when a node computes it."""
        return source if source in self.tensor_names() else None


def _needed_nodes(nodes: list, fetches: set[str], fed: set[str]) -> list:
    """The nodes ``fetches`` need, walking back from them and stopping at the fed tensors (a
    node that computes a fed tensor is left out, as the conversion leaves it out)."""
    needed = set(fetches)
    keep = []
    for node in reversed(nodes):  # an ONNX graph lists its nodes in topological order
        if not any(o in needed for o in node.output if o):
            continue
        if any(o in fed for o in node.output if o):
            continue
        keep.append(node)
        needed.update(_reads(node))
    return list(reversed(keep))


def _reads(node) -> list[str]:
    """Every tensor a node reads, including the outer-scope names its subgraphs use."""
    names = [i for i in node.input if i]
    for attr in node.attribute:
        graphs = [attr.g] if attr.HasField("g") else list(attr.graphs)
        for sub in graphs:
            for inner in sub.node:
                names.extend(_reads(inner))
    return names


def _declared_shape(value_info) -> tuple | None:
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # split at newlines only: a node name the message quotes may hold a carriage return
    return text.split("\n", 1)[0].strip() if text else type(exc).__name__
