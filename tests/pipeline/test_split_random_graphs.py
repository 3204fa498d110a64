"""Seeded random graphs mixing ops the dialect converts with ops it refuses, with branches,
skip connections that cross segments and extra outputs: every split computes onnxruntime's
numbers on the source (1e-4), and no two segments in a row are of one kind."""
from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from nhwc_onnx.api import convert
from tests.pipeline import models
from tests.pipeline.test_split_onnx import assert_pipeline_matches_source

CHANNELS = 4
SEEDS = range(40)


def random_graph(path, seed: int):
    rng = np.random.default_rng(seed)
    b = models.Builder(seed)
    tensors = [b.conv("input", models.C, CHANNELS, 3, "stem")]
    for k in range(int(rng.integers(5, 10))):
        x = tensors[int(rng.integers(max(0, len(tensors) - 3), len(tensors)))]
        kind = rng.choice(["conv", "relu", "add", "lrn", "erf", "div", "sigmoid"])
        name = f"n{k}"
        if kind == "conv":
            y = b.conv(x, CHANNELS, CHANNELS, int(rng.choice([1, 3])), name)
        elif kind == "relu":
            y = b.op("Relu", [x], name)
        elif kind == "sigmoid":
            y = b.op("Sigmoid", [x], name)
        elif kind == "add":  # a skip connection from any earlier tensor
            y = b.op("Add", [x, tensors[int(rng.integers(0, len(tensors)))]], name)
        elif kind == "lrn":  # refused: exponent 0.75
            y = b.op("LRN", [x], name, size=3, alpha=1e-3, beta=0.75, bias=1.0)
        elif kind == "erf":  # refused: no dialect form
            y = b.op("Erf", [x], name)
        else:  # refused: division by a tensor computed at run time
            d = b.op("Sigmoid", [tensors[int(rng.integers(0, len(tensors)))]], f"{name}/den")
            d = b.op("Add", [d, b.const(np.float32(1.0))], f"{name}/one")
            y = b.op("Div", [x, d], name)
        tensors.append(y)
    outputs = [tensors[-1]]
    if len(tensors) > 3 and rng.random() < 0.5:  # an inner tensor as a second output
        outputs.append(tensors[int(rng.integers(1, len(tensors) - 1))])
    outputs = list(dict.fromkeys(outputs))
    shape = [models.N, CHANNELS, models.H, models.W]
    return b.save(path, [("input", [models.N, models.C, models.H, models.W])],
                  [(o, shape) for o in outputs])


@pytest.mark.slow
def test_random_graphs_split_into_alternating_segments_that_match_onnxruntime(tmp_path):
    matched, split = 0, 0
    for seed in SEEDS:
        source = random_graph(tmp_path / f"g{seed}.onnx", seed)
        pipeline = convert(source, tmp_path / f"g{seed}", split=True)
        kinds = [s.kind for s in pipeline.segments]
        assert all(a != b for a, b in pairwise(kinds)), (seed, kinds)
        split += len(kinds) > 1
        assert_pipeline_matches_source(tmp_path / f"g{seed}", source)
        matched += 1
    assert matched == len(SEEDS)
    assert split >= len(SEEDS) // 2  # most graphs hold a refused op and split
