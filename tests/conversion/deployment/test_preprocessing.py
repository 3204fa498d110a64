"""Preprocessing inside the model: the converted input takes raw NHWC pixels
x and the model computes source(((x, channels reversed if asked) - mean) / std). Each source
runs in its own runtime (onnxruntime, OpenCV, TensorFlow) on the preprocessed input, computed
here with numpy; the converted model runs on the raw pixels."""
from __future__ import annotations

import json

import numpy as np
import pytest

import nhwc_onnx
from nhwc_onnx.errors import UnsupportedOpError, UsageError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.runtime import run
from tests.cli_runner import run_cli
from tests.conversion.deployment.models import (
    CAFFE_NET,
    C,
    H,
    W,
    keras_classifier,
    onnx_conv_net,
    onnx_two_input_net,
    run_onnxruntime,
)

MEAN = [123.68, 116.78, 103.94]  # the ImageNet means, in the order the source sees channels
STD = [58.393, 57.12, 57.375]

CASES = {  # (mean, std, reverse_channels)
    "per-channel": (MEAN, STD, False),
    "per-channel reversed": (MEAN, STD, True),
    "scalar": (127.5, 127.5, False),
    "scalar reversed": (127.5, 127.5, True),
    "mean only": (MEAN, None, True),
    "std only": (None, 255.0, False),
}


def _pixels(shape, seed=0) -> np.ndarray:
    """Raw camera-like pixels in [0, 255), NHWC."""
    return np.random.default_rng(seed).uniform(0, 255, shape).astype(np.float32)


def _preprocess_nhwc(x: np.ndarray, mean, std, reverse: bool) -> np.ndarray:
    """What a user's client would compute before feeding the source (NHWC, float32)."""
    if reverse:
        x = x[..., ::-1]
    if mean is not None:
        x = x - np.asarray(mean, np.float32)
    if std is not None:
        x = x / np.asarray(std, np.float32)
    return np.ascontiguousarray(x, dtype=np.float32)


def _options(mean, std, reverse, **more) -> ConvertOptions:
    return ConvertOptions(mean=mean, std=std, reverse_channels=reverse, **more)


def _close(got, want, tol=1e-4):
    scale = max(1.0, float(np.abs(want).max()))
    assert float(np.abs(got.astype(np.float64) - want).max()) <= tol * scale


def _preprocessing_ops(model) -> list[str]:
    return sorted(n.op for n in model.graph.nodes if "/preprocess/" in n.name)


@pytest.mark.parametrize("case", list(CASES))
def test_onnx_raw_pixels_give_the_source_on_the_preprocessed_input(tmp_path, case):
    mean, std, reverse = CASES[case]
    source = onnx_conv_net(tmp_path / "m.onnx")  # a padded conv reads the input first
    result = nhwc_onnx.convert(source, tmp_path / "c.onnx", _options(mean, std, reverse))
    x = _pixels((2, H, W, C))
    want = run_onnxruntime(source, {
        "input": _preprocess_nhwc(x, mean, std, reverse).transpose(0, 3, 1, 2)})["output"]
    got = run(result.model, {"input": x})["output"].transpose(0, 3, 1, 2)
    _close(got, want)
    expected_ops = (["Concat"] + ["Slice"] * C if reverse else []) + (
        ["AddBias"] if mean is not None else []) + (
        [] if std is None else ["Scale"] if np.ndim(std) == 0 else ["BatchNormalization"])
    assert _preprocessing_ops(result.model) == sorted(expected_ops)
    recorded = json.loads(result.model.metadata["preprocessing"])
    def channels(v, default):
        return list(np.broadcast_to(np.float64(default if v is None else v), (C,)))

    assert recorded == {"input": {"mean": channels(mean, 0.0), "std": channels(std, 1.0),
                                  "reverse_channels": reverse}}
    kinds = [d["kind"] for d in result.report.decisions]
    assert kinds.count("preprocessing") == 1
    assert kinds.count("rounding") == (0 if std is None else 1)  # 1/std is rounded once


def test_the_mean_is_not_folded_into_the_padded_conv_after_the_input(tmp_path):
    """Conv(x - m) with zero padding sees -m, not 0, at the border: a bias fold would be
    wrong there. A large mean makes any such fold visible in the numbers."""
    source = onnx_conv_net(tmp_path / "m.onnx")
    result = nhwc_onnx.convert(source, options=ConvertOptions(mean=[1000.0, -500.0, 250.0]))
    graph = result.model.graph
    (add,) = [n for n in graph.nodes if n.op == "AddBias" and "/preprocess/" in n.name]
    assert add.inputs[0] is graph.inputs[0]  # the input itself, minus the mean
    (conv,) = [n for n in graph.nodes if n.name == "conv1"]
    assert conv.inputs[0] is add.outputs[0]
    assert [d for d in result.report.decisions if d["kind"] == "fuse_bias"
            and "preprocess" in d["node"]] == []
    x = _pixels((2, H, W, C), seed=3)
    want = run_onnxruntime(source, {"input": _preprocess_nhwc(
        x, [1000.0, -500.0, 250.0], None, False).transpose(0, 3, 1, 2)})["output"]
    got = run(result.model, {"input": x})["output"].transpose(0, 3, 1, 2)
    _close(got, want)
    border = np.abs(got - want)[:, :, [0, -1], :]
    assert float(border.max()) <= 1e-4 * max(1.0, float(np.abs(want).max()))


def test_preprocessed_tensor_is_bit_exact_for_powers_of_two_and_within_two_ulps_otherwise(
        tmp_path):
    source = onnx_conv_net(tmp_path / "m.onnx")
    x = _pixels((2, H, W, C), seed=5)
    for std, ulps in (([2.0, 0.5, 4.0], 0), (STD, 2)):
        result = nhwc_onnx.convert(source, options=_options(MEAN, std, True))
        (last,) = [n for n in result.model.graph.nodes if n.name == "input/preprocess/std"]
        name = last.outputs[0].name
        got = run(result.model, {"input": x}, extra_outputs=[name])[name]
        want = _preprocess_nhwc(x, MEAN, std, True)
        spacing = np.spacing(np.abs(want)).astype(np.float64)
        assert np.all(np.abs(got.astype(np.float64) - want) <= ulps * spacing)
        if ulps == 0:
            np.testing.assert_array_equal(got, want)


def test_strict_refuses_a_std_that_is_no_power_of_two(tmp_path):
    source = onnx_conv_net(tmp_path / "m.onnx")
    with pytest.raises(UnsupportedOpError) as caught:
        nhwc_onnx.convert(source, tmp_path / "c.onnx", _options(MEAN, STD, False, strict=True))
    (problem,) = caught.value.problems
    assert problem.node == "input/preprocess/std" and "--strict" in problem.reason
    assert not (tmp_path / "c.onnx").exists()
    cli = run_cli("convert", source, "-o", tmp_path / "c.onnx", "--strict", "--std", "3")
    assert cli.exit_code == 1 and "input/preprocess/std" in cli.stderr
    converted = 0
    for std in ([2.0, 0.5, 4.0], 2.0, 0.5):
        result = nhwc_onnx.convert(source, options=_options(MEAN, std, True, strict=True))
        assert [d for d in result.report.decisions if d["kind"] == "rounding"] == []
        converted += 1
    assert converted == 3


def test_tf2onnx_nhwc_input_takes_the_preprocessing_on_its_own_channel_axis(tmp_path):
    source = onnx_conv_net(tmp_path / "m.onnx", nhwc_input=True)
    result = nhwc_onnx.convert(source, options=_options(MEAN, STD, True))
    assert result.model.io_permutations.get("input") in (None, [0, 1, 2, 3])
    x = _pixels((2, H, W, C), seed=7)
    want = run_onnxruntime(source, {"input": _preprocess_nhwc(x, MEAN, STD, True)})["output"]
    got = run(result.model, {"input": x})["output"].transpose(0, 3, 1, 2)
    _close(got, want)


@pytest.mark.parametrize("case", ["per-channel reversed", "scalar", "mean only"])
def test_caffe_raw_pixels_give_opencv_on_the_preprocessed_input(tmp_path, case):
    from tests.frontends.caffe.caffe_testlib import make_net, opencv_forward

    mean, std, reverse = CASES[case]
    proto, weights, _ = make_net(tmp_path, CAFFE_NET, seed=2)
    result = nhwc_onnx.convert(proto, tmp_path / "c.onnx",
                               _options(mean, std, reverse, weights=str(weights)))
    x = _pixels((1, H, W, C), seed=1)
    (want,) = opencv_forward(proto, weights, {"data": _preprocess_nhwc(
        x, mean, std, reverse).transpose(0, 3, 1, 2)}, ["prob"])
    got = run(result.model, {"data": x})["prob"]
    _close(got, want)
    verified = run_cli("verify", proto, tmp_path / "c.onnx", "--weights", weights)
    assert verified.exit_code == 0, verified.output


@pytest.mark.slow
@pytest.mark.parametrize("reverse", [False, True])
def test_keras_raw_pixels_give_tensorflow_on_the_preprocessed_input(tmp_path, reverse):
    import keras

    source = keras_classifier(tmp_path / "k.keras")
    result = nhwc_onnx.convert(source, tmp_path / "k.onnx", _options(MEAN, STD, reverse))
    x = _pixels((1, H, W, C), seed=4)
    model = keras.models.load_model(source, compile=False)
    want = np.asarray(model(_preprocess_nhwc(x, MEAN, STD, reverse), training=False))
    got = run(result.model, {"img": x})["probs"]
    _close(got, want)
    assert nhwc_onnx.verify(source, tmp_path / "k.onnx").ok
    info = run_cli("info", tmp_path / "k.onnx")
    assert f"preprocessing: 'img' takes raw pixels ({'channels reversed, ' if reverse else ''}" \
           f"mean {MEAN}" in info.stdout


def test_verification_feeds_the_source_the_preprocessed_input(tmp_path):
    source = onnx_conv_net(tmp_path / "m.onnx")
    out = tmp_path / "c.onnx"
    result = run_cli("convert", source, "-o", out, "--mean", ",".join(map(str, MEAN)),
                     "--std", ",".join(map(str, STD)), "--reverse-channels", "--verify")
    assert result.exit_code == 0, result.output
    assert "preprocessing: 'input' takes raw pixels" in result.stdout
    assert run_cli("verify", source, out, "--bisect").exit_code == 0
    # the source fed the raw pixels instead differs: the check has teeth
    model = nhwc_onnx.serialize.load(out)
    model.metadata.pop("preprocessing")
    assert not nhwc_onnx.verify(source, model).ok


def test_several_image_inputs_are_named(tmp_path):
    source = onnx_two_input_net(tmp_path / "two.onnx")
    result = nhwc_onnx.convert(source, tmp_path / "c.onnx", ConvertOptions(
        mean={"a": [1.0, 2.0, 3.0], "b": 10.0}, std={"b": [2.0, 4.0, 8.0]},
        reverse_channels=["b"]))
    recorded = json.loads(result.model.metadata["preprocessing"])
    assert recorded == {"a": {"mean": [1.0, 2.0, 3.0], "std": [1.0, 1.0, 1.0],
                              "reverse_channels": False},
                        "b": {"mean": [10.0] * 3, "std": [2.0, 4.0, 8.0],
                              "reverse_channels": True}}
    a, b = _pixels((1, H, W, C), 1), _pixels((1, H, W, C), 2)
    want = run_onnxruntime(source, {
        "a": _preprocess_nhwc(a, [1.0, 2.0, 3.0], None, False).transpose(0, 3, 1, 2),
        "b": _preprocess_nhwc(b, 10.0, [2.0, 4.0, 8.0], True).transpose(0, 3, 1, 2)})
    got = run(result.model, {"a": a, "b": b})
    for name in ("y", "z"):
        _close(got[name].transpose(0, 3, 1, 2), want[name])
    cli = run_cli("convert", source, "-o", tmp_path / "d.onnx", "--mean", "a=1,2,3",
                  "--reverse-channels=b", "--verify")
    assert cli.exit_code == 0, cli.output


@pytest.mark.parametrize(("args", "says"), [
    (["--mean", "1,2,3"], "the model has 2 image inputs (a, b): name the one meant"),
    (["--mean", "a=1,2"], "2 values for input 'a', which has 3 channels: give one value or 3"),
    (["--std", "nosuch=2"], "'nosuch' is not a graph input (they are: a (1x7x5x3), b"),
    (["--reverse-channels"], "the model has 2 image inputs"),
    (["--mean", "a=x,y"], "expected V[,V...] or NAME=V[,V...]"),
    (["--std", "a=0"], "0 is not a number > 0"),
    (["--mean", "a=1", "--mean", "a=2"], "input 'a' is given twice"),
    # the model computes in float32: a mean, a std and 1/std must be finite there
    (["--mean", "a=1e39"], "1e+39 is not finite in float32"),
    (["--std", "a=1e-40"], "1/1e-40 is not finite in float32"),
    (["--std", f"a={2.0 ** -149!r}", "--strict"], "is not finite in float32"),
    (["--std", f"a={2.0 ** -128!r}"], "is not finite in float32"),
])
def test_preprocessing_mistakes_are_usage_errors(tmp_path, args, says):
    source = onnx_two_input_net(tmp_path / "two.onnx")
    result = run_cli("convert", source, "-o", tmp_path / "c.onnx", *args)
    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert not (tmp_path / "c.onnx").exists()


def test_a_non_image_input_takes_no_preprocessing(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["features", "w"], ["y"], name="fc")], "mlp",
        [info("features", TensorProto.FLOAT, [2, 6])], [info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.ones((6, 3), np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "mlp.onnx")
    with pytest.raises(UsageError, match="input 'features' is not an image .* it is 2x6"):
        nhwc_onnx.convert(tmp_path / "mlp.onnx", options=ConvertOptions(mean={"features": 1}))
    with pytest.raises(UsageError, match="the model has no image input"):
        nhwc_onnx.convert(tmp_path / "mlp.onnx", options=ConvertOptions(std=2))
    cli = run_cli("convert", tmp_path / "mlp.onnx", "-o", tmp_path / "c.onnx", "--mean", "1")
    assert cli.exit_code == 2 and "no image input" in cli.stderr


@pytest.mark.parametrize(("field", "value", "error", "says"), [
    ("mean", "1,2", TypeError, r"^ConvertOptions\(mean=...\): expected a number or a sequence"),
    ("mean", [1, "2"], TypeError, r"^ConvertOptions\(mean=...\): expected numbers, got str"),
    ("mean", [], UsageError, r"^Invalid value for 'mean': no value given"),
    ("mean", float("inf"), UsageError, r"^Invalid value for 'mean': inf is not finite"),
    ("std", {"img": [1, -2]}, UsageError, r"^Invalid value for 'std\['img'\]': -2 is not a "),
    ("std", {3: 1.0}, TypeError, r"^ConvertOptions\(std=...\): every key must be an input"),
    ("reverse_channels", 1, TypeError, r"^ConvertOptions\(reverse_channels=...\): expected True"),
    ("reverse_channels", [1], TypeError, r"^ConvertOptions\(reverse_channels=...\): every name"),
    ("rename", "a=b", TypeError, r"^ConvertOptions\(rename=...\): expected a mapping OLD -> NEW"),
    ("rename", {"a": ""}, TypeError, r"^ConvertOptions\(rename=...\): every name must be"),
    ("rename", {"a": "x", "b": "x"}, UsageError, r"^Invalid value for 'rename': several names"),
])
def test_the_api_checks_the_new_options_naming_the_parameter(field, value, error, says):
    with pytest.raises(error, match=says):
        ConvertOptions(**{field: value})


@pytest.mark.parametrize("std", [2.0 ** -127, 2.0 ** 127, 3e38])
def test_a_std_whose_reciprocal_is_finite_in_float32_is_taken(std):
    # the boundary: 2**-127 (1/std = 2**127, the largest power of two in float32) passes,
    # 2**-128 does not (above); 2**127 (1/std subnormal, not zero) passes
    assert ConvertOptions(std=std).std == {"": (std,)}


def test_the_api_options_are_normalised_and_recorded_only_when_set():
    assert ConvertOptions().to_report() == ConvertOptions(
        rename={}, mean=None, std=None, reverse_channels=False).to_report()
    options = ConvertOptions(rename={"input": "img"}, mean=np.array([1, 2, 3]), std=2,
                             reverse_channels=True)
    assert options.mean == {"": (1.0, 2.0, 3.0)} and options.std == {"": (2.0,)}
    assert options.reverse_channels == ("",)
    report = options.to_report()
    assert (report["rename"], report["mean"], report["std"], report["reverse_channels"]) == (
        {"input": "img"}, [1.0, 2.0, 3.0], [2.0], True)
    named = ConvertOptions(mean={"a": 1}, reverse_channels="a,b").to_report()
    assert named["mean"] == {"a": [1.0]} and named["reverse_channels"] == ["a", "b"]
    assert ConvertOptions(reverse_channels=["", "a", "a"]).reverse_channels == ("", "a")
