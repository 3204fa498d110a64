"""TensorFlow models the dialect refuses in part, as frozen GraphDefs (.pb), for the split's
tests: each the TF form of a family in ``models.py`` (NHWC throughout, weights seeded)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

N, H, W, C = 2, 10, 9, 3  # distinct sizes, so a wrong axis cannot pass


def _tf():
    import tensorflow

    return tensorflow


class Weights:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def __call__(self, *shape, scale: float | None = None):
        fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        scale = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        return _tf().constant((self.rng.standard_normal(shape) * scale).astype(np.float32))


def freeze(path: Path, fn, shape, name: str = "image") -> Path:
    """``fn`` traced on one float input of ``shape`` (None: an open axis), frozen, written."""
    tf = _tf()
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    concrete = tf.function(fn).get_concrete_function(tf.TensorSpec(shape, tf.float32, name))
    frozen = convert_variables_to_constants_v2(concrete)
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    return path


def run(path: Path, feeds: dict) -> list[np.ndarray]:
    """The frozen graph run by TensorFlow: its outputs (Identity nodes) in order."""
    tf = _tf()
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(path.read_bytes())
    outputs = [n.name for n in graph_def.node if n.op == "Identity"
               and not any(n.name in i for m in graph_def.node for i in m.input)]

    def imported():
        tf.compat.v1.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(imported, [])
    fn = wrapped.prune([wrapped.graph.get_tensor_by_name(f"{k}:0") for k in feeds],
                       [wrapped.graph.get_tensor_by_name(f"{o}:0") for o in outputs])
    return [np.asarray(t) for t in fn(*[tf.constant(v) for v in feeds.values()])]


def _conv(x, w, cin, cout, k=3, stride=1):
    tf = _tf()
    return tf.nn.conv2d(x, w(k, k, cin, cout), stride, "SAME") + w(cout, scale=0.1)


def _dense(x, w, fin, fout):
    tf = _tf()
    return tf.tensordot(x, w(fin, fout), 1) + w(fout, scale=0.1) if len(x.shape) > 2 \
        else tf.matmul(x, w(fin, fout)) + w(fout, scale=0.1)


def _layer_norm(x, w, width):
    tf = _tf()
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-5) * w(width, scale=1.0) + w(width, scale=0.1)


def _gelu(x):
    return _tf().nn.gelu(x, approximate=False)  # the Erf form


def l2_embedder(path: Path, batch=N) -> Path:
    """Convs, global mean, a dense head, then tf.math.l2_normalize."""
    tf = _tf()
    w = Weights(1)

    def fn(image):
        x = tf.nn.relu(_conv(image, w, C, 8))
        x = tf.nn.relu(_conv(x, w, 8, 12, stride=2))
        e = _dense(tf.reduce_mean(x, axis=[1, 2]), w, 12, 7)
        return tf.math.l2_normalize(e, axis=-1)

    return freeze(path, fn, [batch, H, W, C])


def vit_block(path: Path) -> Path:
    """Patch embedding (a strided conv), tokens, a pre-norm MLP block (LayerNorm, GELU), a
    residual, a final LayerNorm, mean over tokens, a head."""
    tf = _tf()
    w = Weights(2)
    dim = 16

    def fn(image):
        x = _conv(image, w, C, dim, stride=2)  # N,5,5,16
        t = tf.reshape(x, [N, -1, dim])
        h = _dense(_gelu(_dense(_layer_norm(t, w, dim), w, dim, 2 * dim)), w, 2 * dim, dim)
        t = _layer_norm(t + h, w, dim)
        return _dense(tf.reduce_mean(t, axis=1), w, dim, 5)

    return freeze(path, fn, [N, H, W, C])


def convnext_block(path: Path) -> Path:
    """A stem conv, then a ConvNeXt block: depthwise 7x7, LayerNorm over channels, Dense,
    GELU, Dense, residual; then a head."""
    tf = _tf()
    w = Weights(3)
    dim = 8

    def fn(image):
        x = _conv(image, w, C, dim)
        d = tf.nn.depthwise_conv2d(x, w(7, 7, dim, 1), [1, 1, 1, 1], "SAME")
        h = _dense(_gelu(_dense(_layer_norm(d, w, dim), w, dim, 4 * dim)), w, 4 * dim, dim)
        x = x + h
        return _dense(tf.reduce_mean(x, axis=[1, 2]), w, dim, 5)

    return freeze(path, fn, [N, H, W, C])


def conv_lstm(path: Path, cell: str = "LSTM", unroll: bool = True) -> Path:
    """A CRNN: a conv front over (N,12,W,1), height folded into features, the width as time,
    a Keras LSTM or GRU (unrolled over it, or a While loop), a dense layer per step."""
    tf = _tf()
    w = Weights(4)
    keras = tf.keras
    layer = (keras.layers.LSTM if cell == "LSTM" else keras.layers.GRU)(
        6, return_sequences=True, unroll=unroll)
    layer.build((N, W, 12))
    for v in layer.weights:
        v.assign(w(*v.shape, scale=0.3))

    def fn(image):
        x = tf.nn.relu(_conv(image, w, 1, 4))
        x = tf.nn.max_pool2d(x, [4, 1], [4, 1], "VALID")  # N,3,W,4
        seq = tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [N, W, 12])
        return _dense(layer(seq), w, 6, 5)

    return freeze(path, fn, [N, 12, W, 1])


def log_mel_cnn(path: Path) -> Path:
    """A magnitude spectrogram (N,F,T,1): power, a mel filterbank over frequencies, log(x +
    eps), then a CNN classifier."""
    tf = _tf()
    w = Weights(5)
    freq, mels = 12, 10
    bank = tf.constant(np.abs(w.rng.standard_normal((freq, mels))).astype(np.float32))

    def fn(spectrogram):
        p = tf.transpose(tf.pow(spectrogram, 2.0), [0, 2, 3, 1])  # N,T,1,F
        m = tf.math.log(tf.tensordot(p, bank, 1) + 1e-6)  # N,T,1,M
        x = tf.transpose(m, [0, 1, 3, 2])  # N,T,M,1
        x = tf.nn.relu(_conv(x, w, 1, 6))
        x = _conv(x, w, 6, 8, stride=2)
        return _dense(tf.reduce_mean(x, axis=[1, 2]), w, 8, 4)

    return freeze(path, fn, [N, freq, 9, 1], name="spectrogram")


def lrn_net(path: Path) -> Path:
    """An AlexNet-style net: conv, relu, LRN, pool, conv, relu, LRN, head."""
    tf = _tf()
    w = Weights(6)

    def fn(image):
        x = tf.nn.relu(_conv(image, w, C, 8))
        x = tf.nn.local_response_normalization(x, 2, 1.0, 1e-4, 0.75)
        x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        x = tf.nn.relu(_conv(x, w, 8, 12))
        x = tf.nn.local_response_normalization(x, 1, 2.0, 1e-4, 0.75)
        return tf.nn.softmax(_dense(tf.reduce_mean(x, axis=[1, 2]), w, 12, 6))

    return freeze(path, fn, [N, H, W, C])


def whole_net(path: Path) -> Path:
    """A net the dialect converts whole."""
    tf = _tf()
    w = Weights(7)

    def fn(image):
        x = tf.nn.relu(_conv(image, w, C, 8))
        return _dense(tf.reduce_mean(x, axis=[1, 2]), w, 8, 4)

    return freeze(path, fn, [N, H, W, C])


def flatten_then_refused(path: Path, batch_arithmetic=None, slice_by=None) -> Path:
    """Convs, a Keras-style Flatten (Reshape to [shape(x)[0], -1]: a number computed from the
    batch), a dense layer, then a refused Rsqrt; ``batch_arithmetic(n)`` scales the output
    by a number computed from the batch's size at run time, ``slice_by(n)`` slices the
    features up to such a number (a bound the frontend must take as a constant)."""
    tf = _tf()
    w = Weights(8)

    def fn(image):
        x = tf.nn.relu(_conv(image, w, C, 4, stride=2))  # N,5,5,4
        flat = tf.reshape(x, tf.stack([tf.shape(x)[0], -1]))
        y = tf.math.rsqrt(tf.abs(_dense(flat, w, 100, 6)) + 1.0)
        n = tf.shape(image)[0]
        if batch_arithmetic is not None:
            y = y * tf.cast(batch_arithmetic(n), tf.float32)
        if slice_by is not None:
            y = y[:, :slice_by(n)]
        return y

    return freeze(path, fn, [None, H, W, C])
