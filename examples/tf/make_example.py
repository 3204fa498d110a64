"""Write examples/tf/small_cnn.pb: a small frozen Keras CNN with fixed random weights.

Covers the common frozen-graph ops: Conv2D (SAME, strided), DepthwiseConv2dNative, batch norm,
ReLU6, ZeroPadding + VALID conv, average pooling, bilinear upsampling, concat, global pooling,
Dense and Softmax. Needs TensorFlow (only to make the file; converting it does not).

    python examples/tf/make_example.py
"""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

OUT = Path(__file__).resolve().parent / "small_cnn.pb"


def build():
    import keras

    keras.utils.set_random_seed(7)
    L = keras.layers
    x = keras.Input((33, 31, 3), name="image")
    y = L.Conv2D(8, 3, strides=2, padding="same", name="stem")(x)
    y = L.BatchNormalization(name="stem_bn")(y)
    y = L.ReLU(6.0, name="stem_relu6")(y)
    z = L.DepthwiseConv2D(3, padding="same", name="dw")(y)
    z = L.ZeroPadding2D(((1, 0), (0, 1)), name="pad")(z)
    z = L.Conv2D(8, 2, padding="valid", name="pw")(z)
    a = L.AveragePooling2D(2, padding="same", name="avg")(y)
    a = L.UpSampling2D(2, interpolation="bilinear", name="up")(a)
    a = L.Cropping2D(((0, a.shape[1] - 17), (0, a.shape[2] - 16)), name="crop")(a)
    y = L.Concatenate(name="concat")([z, a])
    y = L.GlobalAveragePooling2D(name="gap")(y)
    y = L.Dense(5, activation="softmax", name="probs")(y)
    model = keras.Model(x, y)
    # Non-trivial batch-norm statistics so the folded weights matter.
    bn = model.get_layer("stem_bn")
    rng = np.random.default_rng(7)
    bn.set_weights([rng.uniform(0.5, 1.5, 8), rng.uniform(-0.5, 0.5, 8),
                    rng.uniform(-0.5, 0.5, 8), rng.uniform(0.5, 1.5, 8)])
    return model


def main() -> None:
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    model = build()
    spec = tf.TensorSpec((1, 33, 31, 3), tf.float32, name="image")
    concrete = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
    frozen = convert_variables_to_constants_v2(concrete)
    OUT.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes); output tensor {frozen.outputs[0].name}")


if __name__ == "__main__":
    main()
