"""Shared helpers: freeze tf.functions / Keras models to GraphDef bytes, load them through the
frontend from a file, and run the core model with the numpy reference executor."""
from __future__ import annotations

import os

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from nhwc_onnx.frontends.tensorflow import load
from nhwc_onnx.options import ConvertOptions
from tests.core_reference import run_core


def tf():
    import tensorflow

    return tensorflow


def freeze(fn, specs) -> tuple[bytes, object]:
    """GraphDef bytes of ``fn`` traced on ``specs`` (TensorSpecs), variables frozen."""
    tensorflow = tf()
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    concrete = tensorflow.function(fn).get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(concrete)
    return frozen.graph.as_graph_def().SerializeToString(), frozen


def freeze_keras(model, shape) -> tuple[bytes, object]:
    tensorflow = tf()
    spec = tensorflow.TensorSpec(shape, tensorflow.float32, name="x")
    return freeze(lambda x: model(x, training=False), [spec])


def spec(shape, name="x", dtype=None):
    tensorflow = tf()
    return tensorflow.TensorSpec(shape, dtype or tensorflow.float32, name=name)


def load_bytes(tmp_path, data: bytes, name: str = "model.pb", **options):
    path = tmp_path / name
    path.write_bytes(data)
    return load(path, ConvertOptions(**options))


def rand(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def close(got, want, tol=1e-4):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    assert err <= tol * scale, f"max abs error {err} > {tol * scale}"
    return err


def check_core(tmp_path, fn, inputs: dict, tol=1e-4, **options):
    """Freeze ``fn`` for the shapes of ``inputs``, convert, run core vs TF; returns the model."""
    tensorflow = tf()
    specs = [spec(v.shape, k, tensorflow.as_dtype(v.dtype)) for k, v in inputs.items()]
    data, frozen = freeze(fn, specs)
    options.setdefault("outputs", [t.name for t in frozen.outputs])
    model = load_bytes(tmp_path, data, **options)
    want = frozen(*[tensorflow.constant(v) for v in inputs.values()])
    want = want if isinstance(want, (list, tuple)) else [want]
    got = run_core(model, inputs)
    outs = [got[v.name] for v in model.graph.outputs]
    assert len(outs) == len(want)
    for g, w in zip(outs, want):
        close(g, w.numpy(), tol)
    return model


def run_dialect(model, feeds: dict, **pass_options) -> list:
    """Convert a core model to the dialect in place, run it with onnxruntime on source-layout
    feeds, and return the outputs in the source layout (the model records the permutations)."""
    from nhwc_onnx.passes.base import PassContext
    from nhwc_onnx.passes.pipeline import to_dialect
    from nhwc_onnx.runtime import run

    to_dialect(model, PassContext(options=ConvertOptions(**pass_options)))
    perms = model.io_permutations
    ours = {k: v.transpose(perms[k]) if k in perms else v for k, v in feeds.items()}
    outs = run(model, ours)
    result = []
    for v in model.graph.outputs:
        arr = outs[v.name]
        if v.name in perms:
            arr = arr.transpose(np.argsort(perms[v.name]))
        result.append(arr)
    return result


def dialect_ops(model) -> dict:
    return model.graph.op_counts()
