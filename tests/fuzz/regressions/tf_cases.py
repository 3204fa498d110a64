"""TensorFlow failures the graph fuzzer found, shrunk, as small raw-op plans (see
onnx_cases.py for the conventions)."""
from __future__ import annotations

import numpy as np

from tests.fuzz.claims import Made
from tests.fuzz.tf_graphs import TfGraph


def channel_shuffle_then_bilinear_resize():
    """ShuffleNet's channel shuffle (Reshape -> Transpose -> Reshape on the NHWC map) then a
    half-pixel ResizeBilinear doubling H: the shuffled map is read in another layout
    ('linear resize factors [1, 1, 1, 2] are not [1, sH, sW, 1]')."""
    h, w, c = 3, 5, 4

    def shuffle(env, tf):
        y = tf.raw_ops.Reshape(tensor=env["x"], shape=np.array([-1, h, w, 2, c // 2], np.int32))
        y = tf.raw_ops.Transpose(x=y, perm=np.array([0, 1, 2, 4, 3], np.int32))
        env["shuffle"] = tf.raw_ops.Reshape(tensor=y, shape=np.array([-1, h, w, c], np.int32),
                                            name="shuffle")

    def resize(env, tf):
        env["resize"] = tf.raw_ops.ResizeBilinear(
            images=env["shuffle"], size=np.array([2 * h, w], np.int32), half_pixel_centers=True,
            name="resize")

    made = {"shuffle": Made("Reshape"),
            "resize": Made("ResizeBilinear", {"mode": "linear", "coord": "half_pixel",
                                              "factors": [1, 1, 2, 1], "in_hw": (h, w)})}
    return TfGraph([shuffle, resize], made, 1, (h, w, c), ["resize"])


CASES = {f.__name__: f for f in (channel_shuffle_then_bilinear_resize,)}
PENDING = {"channel_shuffle_then_bilinear_resize": "tf-channel-shuffle"}
