"""Build the example dialect models in this folder with nhwc-onnx's own IR and serializer.

    python examples/make_examples.py            # rewrites examples/*.onnx and examples/invalid/

The models are tiny and seeded, so the files are byte-identical on every run. Three are valid
dialect models; ``invalid/broken.onnx`` breaks three different rules on purpose, for the demo of
``nhwc-onnx check``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from nhwc_onnx.ir import DIALECT, NHWC, Graph, Model, Value
from nhwc_onnx.serialize import save

HERE = Path(__file__).resolve().parent


def _weights(rng: np.random.Generator, shape: tuple, fan_in: int) -> np.ndarray:
    # He-style scale keeps activations of the random-input demo in a sensible range.
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def _op(graph: Graph, op: str, inputs: list, name: str, **attrs) -> Value:
    return graph.make_node(op, inputs, attrs, name=name, domain=DIALECT).output


def tiny_convnet() -> Model:
    """Conv SAME/2 + Relu6, depthwise 3x3 + AddBias + Relu6, global pool, Dense, Softmax."""
    rng = np.random.default_rng(1)
    g = Graph("tiny_convnet")
    x = g.add_input(Value("image", "float32", (1, 15, 13, 3), NHWC))
    w1 = g.constant(_weights(rng, (8, 3, 3, 3), 27), "conv1/W")
    b1 = g.constant(rng.uniform(-0.1, 0.1, 8).astype(np.float32), "conv1/B")
    y = _op(g, "Conv", [x, w1, b1], "conv1", kernel_shape=[3, 3], strides=[2, 2], pads="SAME")
    y = _op(g, "Relu6", [y], "conv1/relu6")
    wd = g.constant(_weights(rng, (3, 3, 8, 1), 9), "dw2/W")
    y = _op(g, "DepthwiseConv2d", [y, wd], "dw2", kernel_shape=[3, 3], strides=[1, 1],
            pads="SAME")
    bd = g.constant(rng.uniform(-0.1, 0.1, 8).astype(np.float32), "dw2/B")
    y = _op(g, "AddBias", [y, bd], "dw2/bias")
    y = _op(g, "Relu6", [y], "dw2/relu6")
    y = _op(g, "GlobalAveragePool", [y], "pool")
    wf = g.constant(_weights(rng, (5, 1, 1, 8), 8), "logits/W")
    bf = g.constant(np.zeros(5, np.float32), "logits/B")
    y = _op(g, "Dense", [y, wf, bf], "logits")
    y = _op(g, "Softmax", [y], "probabilities", axis=1)
    g.outputs.append(y)
    return Model(g, {"source": "examples/make_examples.py", "example": "tiny_convnet"})


def pad_pool_concat() -> Model:
    """Explicit Pad + MaxPool VALID next to MaxPool SAME, Concat on channels, UpSampling2D."""
    rng = np.random.default_rng(2)
    g = Graph("pad_pool_concat")
    x = g.add_input(Value("features", "float32", (1, 12, 10, 4), NHWC))
    a = _op(g, "Pad", [x], "branch_a/pad", pads=[0, 0, 1, 1, 1, 1, 0, 0], mode="constant",
            value=0.0)
    a = _op(g, "MaxPool", [a], "branch_a/pool", kernel_shape=[3, 3], strides=[2, 2],
            pads="VALID")
    b = _op(g, "AveragePool", [x], "branch_b/pool", kernel_shape=[2, 2], strides=[2, 2],
            pads="SAME")
    y = _op(g, "Concat", [a, b], "concat", axis=3)
    w = g.constant(_weights(rng, (6, 1, 1, 8), 8), "mix/W")
    y = _op(g, "Conv", [y, w], "mix", kernel_shape=[1, 1], pads="VALID")
    y = _op(g, "UpSampling2D", [y], "upsample", size=[1, 2, 2, 1], mode="nearest")
    g.outputs.append(y)
    return Model(g, {"source": "examples/make_examples.py", "example": "pad_pool_concat"})


def mlp_constants() -> Model:
    """Flatten + Dense + LeakyRelu + Dense + Sigmoid; saved with weights as Constant nodes."""
    rng = np.random.default_rng(3)
    g = Graph("mlp_constants")
    x = g.add_input(Value("x", "float32", (2, 3, 2, 5), NHWC))
    y = _op(g, "Flatten", [x], "flatten", axis=1)
    w1 = g.constant(_weights(rng, (7, 30), 30), "fc1/W")
    b1 = g.constant(rng.uniform(-0.1, 0.1, 7).astype(np.float32), "fc1/B")
    y = _op(g, "Dense", [y, w1, b1], "fc1")
    y = _op(g, "LeakyRelu", [y], "fc1/leaky", alpha=0.1)
    w2 = g.constant(_weights(rng, (4, 7), 7), "fc2/W")
    y = _op(g, "Dense", [y, w2], "fc2")
    y = _op(g, "Sigmoid", [y], "scores")
    g.outputs.append(y)
    return Model(g, {"source": "examples/make_examples.py", "example": "mlp_constants"})


def broken() -> Model:
    """Three independent rule violations: broadcast Add, bad pads string, wrong weight shape."""
    rng = np.random.default_rng(4)
    g = Graph("broken")
    x = g.add_input(Value("image", "float32", (1, 9, 9, 3), NHWC))
    # The Conv weight is in ONNX's OIHW order (M, C, kH, kW) instead of (M, kH, kW, C).
    w = g.constant(_weights(rng, (4, 3, 5, 5), 75), "conv_oihw/W")
    a = _op(g, "Conv", [x, w], "conv_oihw", kernel_shape=[5, 5], pads="SAME")
    # "SAME_UPPER" is ONNX's auto_pad spelling; the dialect only knows "SAME" and "VALID".
    b = _op(g, "MaxPool", [x], "pool_bad_pads", kernel_shape=[2, 2], strides=[2, 2],
            pads="SAME_UPPER")
    # Add never broadcasts in the dialect: (1,9,9,3) + (1,1,1,3) must be AddBias or explicit.
    c = g.constant(rng.standard_normal((1, 1, 1, 3)).astype(np.float32), "shift")
    d = _op(g, "Add", [x, c], "add_broadcast")
    g.outputs.extend([a, b, d])
    return Model(g, {"source": "examples/make_examples.py", "example": "broken"})


VALID_EXAMPLES = {
    "tiny_convnet.onnx": (tiny_convnet, False),
    "pad_pool_concat.onnx": (pad_pool_concat, False),
    "mlp_constants.onnx": (mlp_constants, True),
}
INVALID_EXAMPLES = {"invalid/broken.onnx": (broken, False)}


def build_all(out_dir: Path = HERE) -> list[Path]:
    written = []
    for rel, (build, as_constants) in {**VALID_EXAMPLES, **INVALID_EXAMPLES}.items():
        written.append(save(build(), out_dir / rel, weights_as_constants=as_constants))
    return written


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1]) if len(argv) > 1 else HERE
    for path in build_all(out_dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
