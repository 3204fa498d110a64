"""Hold a source op's claim (``nhwc_onnx.support.claims``) to the whole pipeline.

A case writes a small source model whose node under test is named ``node`` (helper nodes have
other names). ``converts`` runs it through the frontend alone (the core ops the node became
must be among the declared ones), then converts it to the dialect (its ops must be among the
claimed ones), then verifies: the source in its own runtime (onnxruntime, TensorFlow, OpenCV)
and the result through ours, on the same seeded random inputs, float32 tolerance 1e-4.
``refused`` checks that the conversion is refused and that the error names the node.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nhwc_onnx import convert, verify
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.frameworks import load_source
from nhwc_onnx.ir import CORE
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.runtime import run
from nhwc_onnx.support.claims import frontend_registry, support_of

TOL = 1e-4
NODE = "node"
# Dialect ops any conversion may add around the node: a layout-free Reshape of a graph input
# or output (the layout pass stores N,C,L maps as N,L,C), a graph output's Identity is removed.
PLUMBING = frozenset({"Reshape"})


@dataclass
class Source:
    """A written source model: its path, the conversion options, what the verification needs."""

    path: Path
    options: ConvertOptions = field(default_factory=ConvertOptions)
    # Ops of the helper nodes around the node under test (dialect ops they become).
    context: frozenset = frozenset()
    # A numpy formula of the source's outputs for runtimes that lack the op (OpenCV lacks a
    # few Caffe layers): feeds (source layout) -> {output name: array}.
    oracle: Callable | None = None
    # The same model spelled as the source runtime knows it (same names and weights).
    oracle_path: Path | None = None


Builder = Callable[[Path], Source]


@dataclass
class Case:
    """``converts``: a model where the op converts (its condition holds); ``refused``: one the
    claim says is refused (a never op on run-time data, a when op outside its condition)."""

    converts: Builder | None = None
    refused: Builder | None = None


def claim(framework: str, op: str):
    return support_of(frontend_registry(framework), op)


def _node_parts(names, node: str = NODE) -> bool:
    return any(n == node or n.startswith(f"{node}/") for n in names)


def _conversion(framework: str, source: Source) -> ConvertOptions:
    return source.options.replace(framework=framework, exact_cut=False)


def check_converts(framework: str, op: str, source: Source, seed: int = 0) -> None:
    registry = frontend_registry(framework)
    declared = set(registry.declaration(op).emits) | {"Identity"}
    core = load_source(source.path, framework, source.options)
    emitted = {n.op for n in core.graph.nodes if n.domain == CORE and n.doc == op}
    assert emitted <= declared, f"{op} emitted {sorted(emitted - declared)}, not declared"
    assert op in core.source_op_counts or not registry.declaration(op).emits, \
        f"the case has no {op} node"
    result = convert(source.path, options=_conversion(framework, source))
    dialect = set(result.model.graph.op_counts())
    allowed = set(claim(framework, op).dialect_ops) | PLUMBING | set(source.context)
    assert dialect <= allowed, f"{op} became {sorted(dialect - allowed)}, not claimed"
    if source.oracle is not None:
        _check_with_oracle(result.model, source.oracle, seed)
        return
    report = verify(source.oracle_path or source.path, result.model,
                    source.options.replace(framework=framework), seed=seed, atol=TOL, rtol=TOL)
    assert report.outputs and report.ok, "\n".join(
        f"{c.name}: max abs {c.max_abs_error:.3g}" for c in report.outputs)


def _check_with_oracle(model, oracle: Callable, seed: int) -> None:
    from nhwc_onnx.verification import random_inputs
    from nhwc_onnx.verification.compare import to_converted_layout, to_source_layout

    perms = model.io_permutations
    shapes = {}
    for v in model.graph.inputs:
        perm = perms.get(v.name)
        shapes[v.name] = tuple(v.shape) if not perm else tuple(np.array(v.shape)[np.argsort(perm)])
    feeds = random_inputs(shapes, seed)
    ours = run(model, {n: to_converted_layout(a, perms.get(n)) for n, a in feeds.items()})
    expected = oracle(feeds)
    assert expected
    for name, want in expected.items():
        got = to_source_layout(ours[name], perms.get(name))
        assert got.shape == want.shape, (name, got.shape, want.shape)
        scale = max(1.0, float(np.max(np.abs(want))))
        assert float(np.max(np.abs(got - want))) <= TOL * scale, name


def check_refused(framework: str, op: str, source: Source) -> None:
    try:
        convert(source.path, options=_conversion(framework, source))
    except UnsupportedOpError as exc:
        assert _node_parts(p.node for p in exc.problems), str(exc)
        return
    raise AssertionError(f"{op}: the conversion was not refused")
