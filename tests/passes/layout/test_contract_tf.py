"""The layout contract, TensorFlow: NHWC graphs keep NHWC I/O (identity permutations) whatever
ops follow, with zero Transposes; Keras Permute -> Flatten -> Dense folds into the Dense weight.
Numbers against TensorFlow itself."""
from __future__ import annotations

import numpy as np
import pytest

from tests.frontends.tensorflow.tf_helpers import (
    close,
    freeze,
    load_bytes,
    rand,
    run_dialect,
    spec,
    tf,
)

pytestmark = pytest.mark.slow


def convert_and_compare(tmp_path, fn, inputs: dict, **pass_options):
    tensorflow = tf()
    specs = [spec(v.shape, k) for k, v in inputs.items()]
    data, frozen = freeze(fn, specs)
    model = load_bytes(tmp_path, data, outputs=[t.name for t in frozen.outputs])
    want = frozen(*[tensorflow.constant(v) for v in inputs.values()])
    want = want if isinstance(want, (list, tuple)) else [want]
    got = run_dialect(model, dict(inputs), **pass_options)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w.numpy())
    return model


CASES = {
    "elementwise": lambda x: tf().nn.relu(x) + x,
    "per_channel_affine": lambda x: x * np.arange(1, 4, dtype=np.float32) + np.float32(0.5),
    "softmax_channels": lambda x: tf().nn.softmax(x, axis=-1),
    "concat_channels": lambda x: tf().concat([x, tf().nn.relu(x)], axis=3),
    "resize_only": lambda x: tf().compat.v1.image.resize_nearest_neighbor(x, [10, 21]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_graph_without_spatial_op_keeps_nhwc_io(tmp_path, name):
    model = convert_and_compare(tmp_path, CASES[name], {"x": rand(2, 5, 7, 3)})
    assert model.io_permutations == {}
    assert model.graph.op_counts().get("Transpose", 0) == 0
    assert model.graph.inputs[0].layout == "NHWC"


def test_dense_only_graph(tmp_path):
    w = rand(6, 4, seed=2)
    model = convert_and_compare(tmp_path, lambda x: tf().matmul(x, w), {"x": rand(2, 6)})
    assert model.io_permutations == {}


def test_keras_permute_flatten_dense_folds_into_the_weight(tmp_path):
    keras = tf().keras
    inp = keras.Input((5, 7, 3), batch_size=2)
    out = keras.layers.Dense(4)(keras.layers.Flatten()(keras.layers.Permute((3, 2, 1))(inp)))
    net = keras.Model(inp, out)
    net.set_weights([rand(105, 4, seed=3), rand(4, seed=4)])
    model = convert_and_compare(tmp_path, lambda x: net(x, training=False),
                                {"x": rand(2, 5, 7, 3)})
    assert model.graph.op_counts().get("Transpose", 0) == 0
    assert "Dense" in model.graph.op_counts()
