"""A TensorFlow channel shuffle (ShuffleNet: Reshape -> Transpose -> Reshape on the NHWC map)
converts exactly whatever reads it: a depthwise Conv, an Add with another map, a reduction, or
a graph output. The layout look-ahead must not store a TF map (already NHWC) permuted: it did,
and the NHWC Conv after the shuffle was refused as reading "an NCHW feature map"."""
from __future__ import annotations

import numpy as np
import pytest

from tests.frontends.exactness import converts_exactly
from tests.frontends.tensorflow.tf_helpers import freeze, spec, tf

H, W, C_IN, GROUPS, PER_GROUP = 6, 7, 3, 3, 4
C = GROUPS * PER_GROUP


def _weights():
    rng = np.random.default_rng(3)
    conv = rng.standard_normal((3, 3, C_IN, C)).astype(np.float32)
    depthwise = rng.standard_normal((3, 3, C, 1)).astype(np.float32)
    return conv, depthwise


def _shuffle(t):
    z = tf().reshape(t, [-1, H, W, GROUPS, PER_GROUP])
    z = tf().transpose(z, [0, 1, 2, 4, 3])
    return tf().reshape(z, [-1, H, W, C])


def _graph(reader: str):
    conv_w, dw_w = _weights()

    def fn(x):
        nn = tf().nn
        y = nn.conv2d(x, conv_w, 1, "SAME")
        s = _shuffle(y)
        if reader == "depthwise":
            return nn.depthwise_conv2d(s, dw_w, [1, 1, 1, 1], "SAME")
        if reader == "add":
            return nn.relu(s) + y
        if reader == "mean":
            return tf().reduce_mean(s, axis=3)
        return s  # the shuffled map is the graph output

    return fn


@pytest.mark.slow
@pytest.mark.parametrize("batch", [2, None], ids=["static", "symbolic"])
@pytest.mark.parametrize("reader", ["depthwise", "add", "mean", "output"])
def test_tf_channel_shuffle_converts_exactly_whatever_reads_it(tmp_path, reader, batch):
    data, _ = freeze(_graph(reader), [spec([batch, H, W, C_IN])])
    source = tmp_path / "shuffle.pb"
    source.write_bytes(data)
    _, model = converts_exactly(source, tmp_path, symbolic=batch is None)
    assert model.io_permutations == {}  # a TF map is NHWC at the source: stored as it is
    ops = model.graph.op_counts()
    assert ops["Transpose"] == 1  # the shuffle's own Transpose, nothing added
    if reader == "depthwise":
        assert ops["DepthwiseConv2d"] == 1
