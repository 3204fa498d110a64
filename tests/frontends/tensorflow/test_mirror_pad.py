"""TF MirrorPad (REFLECT, SYMMETRIC) becomes the core Pad modes ONNX reflect padding uses, then
the same Slice + Concat legalisation; checked against TensorFlow."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tf_helpers import close, freeze, load_bytes, rand, run_dialect, spec

from nhwc_onnx.errors import UnsupportedOpError

SHAPE = (2, 5, 7, 3)
CASES = [
    ("REFLECT", [[0, 0], [1, 2], [3, 0], [0, 0]]),
    ("REFLECT", [[0, 0], [4, 4], [6, 6], [0, 0]]),  # the largest reflect pads: size - 1
    ("SYMMETRIC", [[0, 0], [1, 2], [3, 0], [0, 0]]),
    ("SYMMETRIC", [[0, 0], [5, 5], [7, 7], [0, 0]]),  # the largest symmetric pads: size
    ("SYMMETRIC", [[0, 0], [2, 0], [0, 1], [1, 2]]),  # channels too
]


def _pad_conv(mode, paddings):
    import tensorflow as tf

    w = tf.constant(np.random.default_rng(2).standard_normal((3, 3, 3, 4)).astype(np.float32))

    def fn(x):
        padded = tf.pad(x, paddings, mode=mode)
        if paddings[3] != [0, 0]:
            return padded
        return tf.nn.conv2d(padded, w, 1, "VALID")  # CycleGAN / pix2pix: mirror pad, conv
    return fn


@pytest.mark.slow
def test_mirror_pad_converts_and_matches_tensorflow(tmp_path):
    import tensorflow as tf

    converted = []
    for i, (mode, paddings) in enumerate(CASES):
        data, frozen = freeze(_pad_conv(mode, paddings), [spec(SHAPE)])
        x = rand(*SHAPE)
        want = np.asarray(frozen(tf.constant(x))[0])
        core = load_bytes(tmp_path, data, name=f"pad{i}.pb",
                          outputs=[t.name for t in frozen.outputs])
        assert [n.attrs.get("mode") for n in core.graph.nodes if n.op == "Pad"] == [mode.lower()]
        close(run_dialect(core, {"x": x})[0], want)
        converted.append((mode, i))
    assert len(converted) == len(CASES) == 5


@pytest.mark.parametrize("mode,pad", [("REFLECT", 5), ("SYMMETRIC", 6)])
def test_mirror_pads_past_the_axis_are_refused_with_the_limit(tmp_path, mode, pad):
    import tensorflow as tf

    # TF itself rejects these at run time; a graph can still hold them.
    def fn(x):
        return tf.raw_ops.MirrorPad(input=x, paddings=[[0, 0], [pad, 0], [0, 0], [0, 0]],
                                    mode=mode)
    data, frozen = freeze(fn, [spec(SHAPE)])
    core = load_bytes(tmp_path, data, outputs=[t.name for t in frozen.outputs])
    with pytest.raises(UnsupportedOpError, match=f"{mode.lower()} padding .* exceeds the axis"):
        run_dialect(core, {"x": rand(*SHAPE)})
