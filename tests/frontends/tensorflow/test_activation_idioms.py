"""Activation idioms that are one dialect op (nhwc_onnx/passes/to_dialect/activation_idioms.py):
Keras layers frozen to GraphDefs and hand-written TF forms, converted to the dialect and compared
with the source (Keras ``model(x, training=False)`` / the TF function); near-misses stay refused."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tf_helpers import close, freeze, freeze_keras, load_bytes, rand, run_dialect, spec

from nhwc_onnx.errors import UnsupportedOpError

SHAPE = (2, 7, 5, 3)


def _keras_cases():
    import keras

    L = keras.layers
    slope = keras.initializers.RandomUniform(0.1, 0.5)
    return {
        # Keras 3: tf.where(x > 0, elu(x), alpha * elu(x)) -> Elu(alpha)
        "elu_alpha": ([L.ELU(alpha=0.5)], {"Elu": 1}),
        "selu": ([L.Activation("selu")], {"Elu": 1, "Scale": 1}),
        "prelu_per_channel": ([L.PReLU(alpha_initializer=slope, shared_axes=[1, 2])],
                              {"PRelu": 1}),
        "relu6": ([L.ReLU(max_value=6.0)], {"Relu6": 1}),
        "leaky_relu": ([L.LeakyReLU(negative_slope=0.15)], {"LeakyRelu": 1}),
        "hard_sigmoid": ([L.Activation("hard_sigmoid")], {"Relu6": 1, "Scale": 1}),
        "hard_swish": ([L.Activation("hard_silu")],
                       {"AddBias": 1, "Mul": 1, "Relu6": 1, "Scale": 1}),
    }


@pytest.mark.slow
def test_keras_activations_become_their_dialect_op(tmp_path):
    import keras

    converted = []
    for name, (layers, ops) in _keras_cases().items():
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.Input(SHAPE[1:]), keras.layers.Conv2D(4, 3, padding="same")]
                                 + layers)
        data, _ = freeze_keras(model, SHAPE)
        x = rand(*SHAPE, low=-4, high=4)
        want = np.asarray(model(x, training=False))
        core = load_bytes(tmp_path, data, name=f"{name}.pb")
        got = run_dialect(core, {"x": x})[0]
        close(got, want)
        counts = core.graph.op_counts()
        assert counts.pop("Conv") == 1 and counts == ops, (name, counts)
        converted.append(name)
    assert len(converted) == 7


def _tf_forms():
    import tensorflow as tf

    return {
        # the hand-written ELU (what the issue saw from Keras 3 graphs)
        "where_elu": (lambda x: tf.where(x > 0, x, 0.7 * (tf.exp(x) - 1.0)), {"Elu": 1}),
        "where_elu_sub_first": (lambda x: tf.where(x > 0.0, x, (tf.exp(x) - 1.0) * 1.3),
                                {"Elu": 1}),
        "where_leaky": (lambda x: tf.where(x > 0, x, 0.1 * x), {"LeakyRelu": 1}),
        "where_leaky_steep": (lambda x: tf.where(x > 0, x, 3.0 * x), {"LeakyRelu": 1}),
        "max_leaky": (lambda x: tf.maximum(x, 0.2 * x), {"LeakyRelu": 1}),
        "clip_by_value": (lambda x: tf.clip_by_value(x, 0.0, 6.0), {"Relu6": 1}),
        "max_of_min": (lambda x: tf.maximum(tf.minimum(x, 6.0), 0.0), {"Relu6": 1}),
    }


@pytest.mark.slow
def test_tf_idioms_become_one_dialect_op(tmp_path):
    import tensorflow as tf

    converted = []
    for name, (fn, ops) in _tf_forms().items():
        data, frozen = freeze(fn, [spec(SHAPE)])
        x = rand(*SHAPE, low=-8, high=8)
        want = frozen(tf.constant(x))
        want = np.asarray(want[0] if isinstance(want, (list, tuple)) else want)
        core = load_bytes(tmp_path, data, name=f"{name}.pb",
                          outputs=[t.name for t in frozen.outputs])
        close(run_dialect(core, {"x": x})[0], want)
        assert core.graph.op_counts() == ops, (name, core.graph.op_counts())
        converted.append(name)
    assert len(converted) == 7


@pytest.mark.parametrize("fn_name", ["threshold", "exp_without_minus_one", "other_x",
                                     "elu_true_branch_scaled"])
def test_near_misses_stay_refused(tmp_path, fn_name):
    import tensorflow as tf

    fns = {
        "threshold": lambda x: tf.where(x > 0.5, x, 0.3 * x),
        "exp_without_minus_one": lambda x: tf.where(x > 0, x, 0.3 * tf.exp(x)),
        "other_x": lambda x: tf.where(x > 0, tf.abs(x), 0.3 * x),
        "elu_true_branch_scaled": lambda x: tf.where(x > 0, 2.0 * x, 0.3 * (tf.exp(x) - 1.0)),
    }
    data, frozen = freeze(fns[fn_name], [spec(SHAPE)])
    core = load_bytes(tmp_path, data, outputs=[t.name for t in frozen.outputs])
    with pytest.raises(UnsupportedOpError, match="Where"):
        run_dialect(core, {"x": rand(*SHAPE)})
