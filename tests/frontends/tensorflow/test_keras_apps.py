"""Keras applications (random weights, reduced sizes) frozen, converted to the dialect and run
with onnxruntime, against TensorFlow. Slow: each freezes a full-depth network."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import UnsupportedOpError
from tests.frontends.tensorflow.tf_helpers import freeze_keras, load_bytes, run_dialect

# name -> (input size, constructor kwargs, input range). Sizes are the smallest each accepts
# (or small multiples); widths are reduced where the architecture has a multiplier.
APPS = {
    "MobileNet": (32, {"alpha": 0.25}, 1.0),
    "MobileNetV2": (64, {"alpha": 0.35}, 1.0),
    "MobileNetV3Small": (32, {"alpha": 0.75}, 255.0),
    "MobileNetV3Large": (32, {"alpha": 0.75}, 255.0),
    "ResNet50": (32, {}, 1.0),
    "ResNet50V2": (32, {}, 1.0),
    "InceptionV3": (75, {}, 1.0),
    "DenseNet121": (32, {}, 1.0),
    "Xception": (71, {}, 1.0),
    "VGG16": (32, {}, 1.0),
    "EfficientNetB0": (32, {}, 255.0),
    "NASNetMobile": (32, {}, 1.0),
}
# MobileNetV3's hard-swish divides by 6: legalised as x * (1/6), equal up to one rounding step.
PASS_OPTIONS: dict[str, dict] = {}


def _build(name: str, size: int, kwargs: dict):
    """The application with random weights and random batch-norm statistics (so folding them
    matters)."""
    import keras

    keras.utils.set_random_seed(1)
    constructor = getattr(keras.applications, name)
    model = constructor(weights=None, input_shape=(size, size, 3), classes=7,
                        classifier_activation=None, **kwargs)
    rng = np.random.default_rng(1)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            weights = layer.get_weights()
            shapes = [w.shape for w in weights]
            # gamma, beta, moving mean, moving variance (gamma/beta may be absent)
            stats = [rng.uniform(-0.2, 0.2, shapes[-2]),
                     rng.uniform(0.5, 1.5, shapes[-1])]
            affine = [rng.uniform(0.8, 1.2, sh) if i == 0 else rng.uniform(-0.2, 0.2, sh)
                      for i, sh in enumerate(shapes[:-2])]
            layer.set_weights(affine + stats)
    return model


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(APPS))
def test_keras_application_matches_tensorflow(tmp_path, name):
    size, kwargs, scale = APPS[name]
    model = _build(name, size, kwargs)
    shape = (2, size, size, 3)
    data, frozen = freeze_keras(model, shape)
    core = load_bytes(tmp_path, data, outputs=[t.name for t in frozen.outputs])
    x = np.random.default_rng(0).uniform(0, scale, shape).astype(np.float32)
    want = np.asarray(model(x, training=False))
    got = run_dialect(core, {"x": x}, **PASS_OPTIONS.get(name, {}))[0]
    # Relative to the output's magnitude (random deep nets can have tiny outputs).
    err = float(np.abs(got - want).max()) / float(np.abs(want).max())
    assert err <= 1e-4, f"{name}: relative error {err}"
    assert "Transpose" not in core.graph.op_counts()
    assert all(n.domain == "nhwc" for n in core.graph)


@pytest.mark.slow
def test_convnext_is_refused_listing_its_layernorm_and_gelu_nodes(tmp_path):
    from nhwc_onnx.passes import PassContext
    from nhwc_onnx.passes.pipeline import to_dialect

    model = _build("ConvNeXtTiny", 32, {})
    data, frozen = freeze_keras(model, (1, 32, 32, 3))
    core = load_bytes(tmp_path, data, outputs=[t.name for t in frozen.outputs])
    with pytest.raises(UnsupportedOpError) as info:
        to_dialect(core, PassContext())
    problems = info.value.problems
    # One error for all of them: 23 LayerNormalization (1/sqrt of the variance) and 18 GELU (erf).
    norms = [p for p in problems if "layernorm" in p.node]
    gelus = [p for p in problems if "gelu" in p.node]
    assert len(problems) == 41 and len(norms) == 23 and len(gelus) == 18
    assert all(p.op == "Rsqrt" for p in norms)
    assert all(p.op == "Erf" and "part of source op Erfc" in p.reason for p in gelus)
