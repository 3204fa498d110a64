"""--samples N and the near-constant warning."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nhwc_onnx
from nhwc_onnx.verification.compare import compare
from nhwc_onnx.verification.samples import Samples, near_constant, random_inputs, worse
from tests.verification.verify_models import onnx_net, scale_conv_weight


def test_samples_3_reports_3_and_the_worst_case_per_output(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    result = run_cli("verify", src, out, "--samples", "3", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["samples"] == 3
    assert {o["name"] for o in report["outputs"]} == {"y", "y2"}
    assert all(o["sample"] in (0, 1, 2) for o in report["outputs"])
    text = run_cli("verify", src, out, "--samples", "3")
    assert "seed 0, 3 samples)" in text.stdout


def test_the_worst_sample_is_reported_and_decides(tmp_path):
    """Each sample's own comparison; the report keeps the worst one, per output."""
    src = onnx_net(tmp_path / "net.onnx")
    model = nhwc_onnx.convert(src).model
    singles = []
    for index in range(3):
        feeds = Samples({"x": (2, 3, 11, 7)}, None, 5, 3).feeds(index)
        singles.append(nhwc_onnx.verify(src, model, feeds=feeds).outputs[0])
    combined = nhwc_onnx.verify(src, model, seed=5, samples=3).outputs[0]
    worst = max(range(3), key=lambda i: singles[i].severity)
    assert combined.sample == worst
    assert combined.max_abs_error == singles[worst].max_abs_error
    # sample 0 is the input a single-sample verification always used
    assert nhwc_onnx.verify(src, model, seed=5).outputs[0].max_abs_error == \
        singles[0].max_abs_error


def test_input_files_come_first_then_seeded_random_inputs():
    given = {"x": np.full((1, 2), 7.0, np.float32)}
    samples = Samples({"x": (1, 2)}, given, 3, 3)
    np.testing.assert_array_equal(samples.feeds(0)["x"], given["x"])
    np.testing.assert_array_equal(samples.feeds(1)["x"], random_inputs({"x": (1, 2)}, (3, 1))["x"])
    assert not np.array_equal(samples.feeds(1)["x"], samples.feeds(2)["x"])
    np.testing.assert_array_equal(Samples({"x": (1, 2)}, None, 3, 2).feeds(0)["x"],
                                  random_inputs({"x": (1, 2)}, 3)["x"])


def test_a_failure_in_any_sample_fails_the_output():
    ref = np.ones(4, np.float32)
    good = compare("y", ref, ref)
    bad = compare("y", ref, ref + 1)
    assert not worse(good, bad).within and not worse(bad, good).within
    assert worse(good, compare("y", ref, ref)).within


@pytest.mark.parametrize("samples", [1, 2])
def test_verify_input_file_and_samples(run_cli, tmp_path, samples):
    src = onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    x = np.random.default_rng(1).uniform(-1, 1, (2, 3, 11, 7)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = run_cli("verify", src, out, "--input", f"x={tmp_path / 'x.npy'}", "--samples",
                     samples, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["samples"] == samples


def _affine_net(path, weight_scale: float):
    """y = Conv(x, w * weight_scale) + per-channel bias: near-constant when the scale is tiny."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * np.float32(weight_scale)
    b = np.array([2.0, -1.0, 0.5, 3.0], np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1])],
        "affine", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _constant_net(path):
    """y = x * 0 + 1.5: an output that ignores its input."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "zero"], ["t"], name="mul"),
         helper.make_node("Add", ["t", "c"], ["y"], name="add")],
        "constant", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.zeros((1, 3, 1, 1), np.float32), "zero"),
         numpy_helper.from_array(np.full((1, 3, 1, 1), 1.5, np.float32), "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_near_constant_warning_fires_on_a_constant_output(run_cli, tmp_path):
    src = _constant_net(tmp_path / "c.onnx")
    out = tmp_path / "c.nhwc.onnx"
    result = run_cli("convert", src, "-o", out, "--verify")
    assert result.exit_code == 0, result.output
    assert "Warning: output 'y' is near-constant over the sample" in result.stderr
    report = json.loads(run_cli("verify", src, out, "--format", "json").stdout)
    assert report["ok"] is True and report["near_constant"] == ["y"]
    assert len(report["warnings"]) == 1 and "says little" in report["warnings"][0]
    text = run_cli("verify", src, out, "--samples", "3")
    assert "near-constant over its 3 samples" in text.stderr


def test_no_warning_on_an_output_that_follows_its_input(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    result = run_cli("convert", src, "-o", out, "--verify", "--samples", "3")
    assert result.exit_code == 0 and "near-constant" not in result.output
    assert json.loads(run_cli("verify", src, out, "--format", "json").stdout)[
        "near_constant"] == []


def test_a_bias_dominated_map_is_near_constant_over_samples_not_within_one(tmp_path):
    """One sample's values spread over the biases (2, -1, 0.5, 3); over three samples every
    element stays put: only several samples show that the output ignores its input."""
    src = _affine_net(tmp_path / "a.onnx", 1e-7)
    model = nhwc_onnx.convert(src).model
    assert nhwc_onnx.verify(src, model).near_constant == []
    assert nhwc_onnx.verify(src, model, samples=3).near_constant == ["y"]
    lively = _affine_net(tmp_path / "b.onnx", 0.3)
    assert nhwc_onnx.verify(lively, nhwc_onnx.convert(lively).model,
                            samples=3).near_constant == []


def test_near_constant_threshold_is_ten_tolerances():
    base = np.zeros((2, 3))
    assert near_constant("y", [base, base + 9e-4], 1e-4) is not None  # spread 4.5e-4
    assert near_constant("y", [base, base + 3e-3], 1e-4) is None  # spread 1.5e-3
    assert near_constant("y", [np.array([np.nan, 1.0])], 1e-4) is None


def test_samples_must_be_a_positive_whole_number(tmp_path):
    src = onnx_net(tmp_path / "net.onnx")
    model = nhwc_onnx.convert(src).model
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="samples"):
            nhwc_onnx.verify(src, model, samples=bad)
    with pytest.raises(TypeError, match="feeds"):
        nhwc_onnx.verify(src, model, feeds=[np.zeros((2, 3, 11, 7), np.float32)])


def _severities(src, converted, seed: int, samples: int) -> list[tuple[float, float, float]]:
    """(error over tolerance, max abs error, tolerance) of output 'y' in each sample, computed
    here: the source in onnxruntime, the converted file in our runtime, on the documented
    inputs (sample 0 seeded by seed, sample i by (seed, i), uniform in [-1, 1))."""
    import onnxruntime as ort

    from nhwc_onnx.runtime import run
    from nhwc_onnx.serialize import load

    session = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    model = load(converted)
    result = []
    for i in range(samples):
        rng = np.random.default_rng(seed if i == 0 else (seed, i))
        x = rng.uniform(-1.0, 1.0, (2, 3, 11, 7)).astype(np.float32)
        reference = session.run(["y"], {"x": x})[0].astype(np.float64)
        ours = run(model, {"x": np.ascontiguousarray(x.transpose(0, 2, 3, 1))})["y"]
        error = float(np.abs(ours - reference).max())
        tolerance = 1e-4 + 1e-4 * float(np.abs(reference).max())
        result.append((error / tolerance, error, tolerance))
    return result


def test_the_worst_sample_is_the_one_furthest_out_of_tolerance(run_cli, tmp_path):
    """One weight scaled by 1.005: sample 0 passes on its own, sample 2 is the furthest out;
    the report names sample 2 and says the tolerance it was held to (json, layers, page)."""
    src = onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    bad = scale_conv_weight(out, "conv_b", tmp_path / "bad.onnx", 1.005)
    measured = _severities(src, bad, seed=1, samples=4)
    worst = max(range(4), key=lambda i: measured[i][0])
    assert measured[0][0] < 1 < measured[worst][0] and worst != 0  # the case is what it says
    html = tmp_path / "page.html"
    result = run_cli("verify", src, bad, "--samples", "4", "--seed", "1", "--layers",
                     "--html", html, "--format", "json")
    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    y = next(o for o in report["outputs"] if o["name"] == "y")
    assert y["sample"] == worst and y["within"] is False
    _, error, tolerance = measured[worst]
    assert y["max_abs_error"] == pytest.approx(error, rel=1e-6)
    assert y["tolerance"] == pytest.approx(tolerance, rel=1e-6)
    layer = next(e for e in report["layers"] if e["converted_name"] == "y")
    assert layer["sample"] == worst and layer["tolerance"] == pytest.approx(tolerance, rel=1e-6)
    assert all(e["tolerance"] > 1e-4 for e in report["layers"])  # atol + rtol * a nonzero scale
    assert f'<td class="num">{tolerance:.3g}</td>' in html.read_text(encoding="utf-8")


def test_compare_states_the_tolerance_it_applied():
    reference = np.array([[-3.0, 2.0], [0.5, 1.0]], np.float32)
    c = compare("y", reference, reference + 1e-4, atol=1e-3, rtol=1e-2, batch=7)
    assert c.tolerance == pytest.approx(1e-3 + 1e-2 * 3.0) and c.batch == 7
    assert compare("y", reference, reference[:1], atol=2e-3).tolerance == 2e-3
    assert compare("y", reference[:0], reference[:0], atol=5e-3).tolerance == 5e-3


def test_memory_of_a_verification_does_not_grow_with_samples(tmp_path):
    """Each sample's outputs are dropped once compared: peak traced memory at 8 samples is
    that at 2 (it grew by about 8 float32 copies of the output per sample)."""
    import tracemalloc

    w = np.random.default_rng(0).standard_normal((16, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])],
        "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 96, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    src = tmp_path / "wide.onnx"
    onnx.save(model, src)
    converted = nhwc_onnx.convert(src).model
    output_bytes = 16 * 96 * 64 * 4
    nhwc_onnx.verify(src, converted, samples=2)  # runtimes loaded, sessions cached
    peaks = {}
    for samples in (2, 8):
        tracemalloc.start()
        try:
            assert nhwc_onnx.verify(src, converted, samples=samples).ok
            peaks[samples] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peaks[8] - peaks[2] < output_bytes, peaks


def test_input_file_fixes_the_symbolic_batch_of_the_random_samples_too(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx", static=False)
    out = tmp_path / "net.nhwc.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    x = np.random.default_rng(1).uniform(-1, 1, (5, 3, 11, 7)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = run_cli("verify", src, out, "--input", f"x={tmp_path / 'x.npy'}", "--samples", "3",
                     "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["samples"] == 3 and report["ok"]
    assert {tuple(o["source_shape"]) for o in report["outputs"]} == {(5, 5), (5, 3)}


def test_convert_verify_takes_input_files_like_verify(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx", static=False)
    x = np.random.default_rng(2).uniform(-1, 1, (5, 3, 11, 7)).astype(np.float32)
    npy = tmp_path / "x.npy"
    np.save(npy, x)
    out, report = tmp_path / "net.nhwc.onnx", tmp_path / "r.json"
    result = run_cli("convert", src, "-o", out, "--verify", "--input", f"x={npy}",
                     "--samples", "2", "--report", report)
    assert result.exit_code == 0, result.output
    verification = json.loads(report.read_text())["verification"]
    assert verification["samples"] == 2 and verification["ok"]
    # the file was sample 0: its batch of 5, where random inputs alone run at 1 and 3
    assert {tuple(o["source_shape"]) for o in verification["outputs"]} == {(5, 5), (5, 3)}
    # --input describes the verification, and is an input: never an output path
    assert run_cli("convert", src, "-o", out, "--input", f"x={npy}").exit_code == 2
    before = npy.read_bytes()
    clash = run_cli("convert", src, "-o", npy, "--verify", "--input", f"x={npy}")
    assert clash.exit_code != 0 and npy.read_bytes() == before
    several = run_cli("convert", src, src, "--output-dir", tmp_path / "o", "--verify",
                      "--input", f"x={npy}")
    assert several.exit_code == 2 and "--input" in several.stderr
