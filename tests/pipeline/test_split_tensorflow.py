"""convert --split on TensorFlow sources the dialect refuses in part: the core ops written as
standard ONNX, split as an ONNX source is; each pipeline run on random inputs against
TensorFlow running the frozen graph (1e-4), checked by ``check``."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nhwc_onnx import pipeline as pipelines
from nhwc_onnx.api import convert
from tests.cli_runner import run_cli
from tests.pipeline import tf_models as models
from tests.pipeline.splitting import built_and_split, kinds

TOL = 1e-4


def feeds_for(loaded, batch: int | None = None, seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    return {e.name: rng.standard_normal([batch if isinstance(d, str) else d
                                         for d in e.shape]).astype(np.float32)
            for e in loaded.manifest.inputs}


def assert_matches_tensorflow(folder, source, batch: int | None = None) -> None:
    """The saved pipeline and TensorFlow on the same random inputs (NHWC both: a TF source's
    inputs and outputs keep their axis order)."""
    loaded = pipelines.load(folder)
    assert all(e.permutation is None for e in loaded.manifest.inputs + loaded.manifest.outputs)
    feeds = feeds_for(loaded, batch)
    want = models.run(source, feeds)
    got = loaded.run(feeds)
    assert len(loaded.manifest.outputs) == len(want)
    for e, expected in zip(loaded.manifest.outputs, want):
        have = got[e.name]
        assert have.shape == expected.shape, e.name
        np.testing.assert_allclose(have, expected, rtol=TOL,
                                   atol=TOL * max(1.0, float(np.abs(expected).max())),
                                   err_msg=e.name)


def split_cli(tmp_path, build, *extra):
    return built_and_split(tmp_path, build, "model.pb", *extra)


def standard_ops(out, manifest) -> set[str]:
    import onnx

    return {n.op_type for s in manifest["segments"] if s["kind"] == "onnx"
            for n in onnx.load(str(out / s["file"])).graph.node}


def test_l2_normalised_embedder_splits_into_a_dialect_body_and_a_standard_tail(tmp_path):
    source, out, manifest, result = split_cli(tmp_path, models.l2_embedder, "--verify",
                                              "--layers")
    assert kinds(manifest) == ["dialect", "onnx"]
    assert manifest["inputs"][0]["shape"] == [models.N, models.H, models.W, models.C]
    assert manifest["inputs"][0]["permutation"] is None
    assert "verification: MATCH" in result.stdout
    assert "100.0% of" in result.stdout
    assert "Sqrt" in standard_ops(out, manifest)  # l2_normalize's Rsqrt, as standard ops
    assert_matches_tensorflow(out, source)


@pytest.mark.parametrize("build", [models.vit_block, models.convnext_block],
                         ids=["vit", "convnext"])
def test_transformer_style_blocks_alternate_dialect_and_standard_segments(tmp_path, build):
    """Each LayerNorm's Rsqrt and the GELU's Erf run standard, the Dense layers between them
    in the dialect: seven alternating segments."""
    source, out, manifest, _ = split_cli(tmp_path, build)
    assert kinds(manifest) == ["dialect", "onnx"] * 3 + ["dialect"]
    assert "Erf" in standard_ops(out, manifest)
    assert_matches_tensorflow(out, source)


def test_log_mel_front_runs_its_log_in_a_standard_segment(tmp_path):
    source, out, manifest, _ = split_cli(tmp_path, models.log_mel_cnn)
    assert "Log" in standard_ops(out, manifest)
    # the power and filterbank (a per-pixel Dense) dialect, the Log standard, the CNN dialect
    assert kinds(manifest) == ["dialect", "onnx", "dialect"]
    assert_matches_tensorflow(out, source)


def test_lrn_net_alternates_five_segments(tmp_path):
    source, out, manifest, _ = split_cli(tmp_path, models.lrn_net)
    assert kinds(manifest) == ["dialect", "onnx", "dialect", "onnx", "dialect"]
    assert_matches_tensorflow(out, source)


def test_unrolled_recurrent_layer_after_a_conv_front_converts_whole(tmp_path):
    """Keras LSTM/GRU with unroll=True are MatMuls, Sigmoids and Tanhs: the dialect runs them,
    so the pipeline is one dialect segment."""
    for cell in ("LSTM", "GRU"):
        source, out, manifest, _ = split_cli(tmp_path / cell,
                                             lambda p, cell=cell: models.conv_lstm(p, cell))
        assert kinds(manifest) == ["dialect"], cell
        assert_matches_tensorflow(out, source)


def test_symbolic_batch_split_runs_at_batch_1_and_3(tmp_path):
    source, out, manifest, result = split_cli(
        tmp_path, lambda p: models.l2_embedder(p, batch=None), "--verify")
    assert kinds(manifest) == ["dialect", "onnx"]
    assert isinstance(manifest["inputs"][0]["shape"][0], str)
    assert isinstance(manifest["outputs"][0]["shape"][0], str)
    assert "verification: MATCH" in result.stdout
    for batch in (1, 3):
        assert_matches_tensorflow(out, source, batch)


def test_model_that_converts_whole_is_one_dialect_segment_with_plain_convert_bytes(tmp_path):
    source, out, manifest, _ = split_cli(tmp_path, models.whole_net)
    assert kinds(manifest) == ["dialect"]
    plain = tmp_path / "plain.onnx"
    convert(source, plain)
    assert (out / manifest["segments"][0]["file"]).read_bytes() == plain.read_bytes()


def test_run_info_and_verify_take_the_pipeline_of_a_tensorflow_source(tmp_path):
    source, out, manifest, _ = split_cli(tmp_path, models.lrn_net)
    info = run_cli("info", out)
    assert info.exit_code == 0, info.output
    assert "segment" in info.stdout
    verified = run_cli("verify", source, out, "--layers")
    assert verified.exit_code == 0, verified.output
    assert "MATCH" in verified.stdout
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).standard_normal(manifest["inputs"][0]["shape"])
            .astype(np.float32))
    ran = run_cli("run", out, "--input", f"{manifest['inputs'][0]['name']}={x}",
                  "-o", tmp_path / "outs")
    assert ran.exit_code == 0, ran.output


def test_node_without_a_converter_is_still_refused_with_split(tmp_path):
    """A Keras LSTM left as a loop (frozen as a TF1 while loop) has no converter: no core op
    to run, so the split is refused listing it, and nothing is written."""
    source = models.conv_lstm(tmp_path / "model.pb", "LSTM", unroll=False)
    out = tmp_path / "out"
    result = run_cli("convert", source, "--split", "-o", out)
    assert result.exit_code == 1
    assert "(NextIteration): TensorFlow 1 while loops are not supported" in result.stderr
    assert not out.exists()


def test_reshape_target_computed_from_a_symbolic_batch_is_computed_at_run_time(tmp_path):
    """The Flatten's [N, -1] folds to [11, -1] at the first probe and [13, -1] at the
    second: the standard form computes N from the input, so the pipeline keeps the batch."""
    source, out, manifest, result = split_cli(tmp_path, models.flatten_then_refused,
                                              "--verify")
    assert kinds(manifest) == ["dialect", "onnx"]
    assert isinstance(manifest["inputs"][0]["shape"][0], str)
    assert "verification: MATCH" in result.stdout
    for batch in (1, 3, 7):
        assert_matches_tensorflow(out, source, batch)


def test_batch_arithmetic_the_frontend_keeps_as_ops_runs_in_the_standard_segment(tmp_path):
    """x * min(N, 5): the frontend writes Shape, Slice and Minimum as ops (nothing folds), so
    the standard segment computes min(N, 5) at run time: exact at every batch."""
    source, out, manifest, _ = split_cli(
        tmp_path, lambda p: models.flatten_then_refused(p, lambda n: _tf().minimum(n, 5)))
    assert kinds(manifest) == ["dialect", "onnx"]
    assert {"Shape", "Min"} <= standard_ops(out, manifest)
    for batch in (1, 3, 7):
        assert_matches_tensorflow(out, source, batch)


def test_number_that_is_no_straight_line_of_the_batch_is_refused_with_the_remedy(tmp_path):
    """A slice bound of min(N, 5) must be a constant: it is 5 at both probe sizes, the
    frontend finds it while it folds, and the split refuses it naming the node, as a plain
    conversion does; --batch 3 splits."""
    source = models.flatten_then_refused(tmp_path / "model.pb",
                                         slice_by=lambda n: _tf().minimum(n, 5))
    result = run_cli("convert", source, "--split", "-o", tmp_path / "out")
    assert result.exit_code == 1, result.output
    assert "strided_slice" in result.stderr and "--batch" in result.stderr
    assert not (tmp_path / "out").exists()
    fixed = run_cli("convert", source, "--split", "--batch", "3", "-o", tmp_path / "fixed",
                    "--verify")
    assert fixed.exit_code == 0, fixed.output
    assert "verification: MATCH" in fixed.stdout


def _tf():
    import tensorflow

    return tensorflow


def test_refusal_and_info_say_how_a_tensorflow_graph_would_split_and_what_it_costs(tmp_path):
    source = models.lrn_net(tmp_path / "model.pb")
    refused = run_cli("convert", source, "-o", tmp_path / "x.onnx")
    assert refused.exit_code == 1
    assert ("with --split (estimated from these refusals): 5 segment(s) (3 dialect, 2 "
            "standard ONNX), 100.0% of MACs in dialect segments") in refused.stderr
    info = run_cli("info", source)
    assert info.exit_code == 0, info.output
    # conv1 10x9x8 x 27 + conv2 5x4x12 x 72 (VALID pooling), the LRN band sums 10x9x8 x 8 +
    # 5x4x12 x 12, the head 12 x 6
    assert "cost: 45,432 MACs per sample" in info.stdout


def test_rename_preprocessing_and_a_cut_work_with_split(tmp_path):
    """--rename names the pipeline's ends (the manifest maps them back to the TF tensors),
    --mean/--std apply to the NHWC image input its dialect segment reads, --outputs cuts
    the graph before its core ops are written."""
    source, out, manifest, result = split_cli(
        tmp_path, models.l2_embedder, "--rename", "image=pixels", "--rename",
        "Identity=embedding", "--mean", "0.5", "--std", "2", "--verify")
    assert [e["name"] for e in manifest["inputs"]] == ["pixels"]
    assert [e["name"] for e in manifest["outputs"]] == ["embedding"]
    assert manifest["source_names"] == {"pixels": "image:0", "embedding": "Identity:0"}
    assert "verification: MATCH" in result.stdout
    loaded = pipelines.load(out)
    x = np.random.default_rng(1).uniform(0, 1, (models.N, models.H, models.W, models.C)
                                         ).astype(np.float32)
    want = models.run(source, {"image": (x - 0.5) / 2})[0]  # the source sees (x - mean) / std
    np.testing.assert_allclose(loaded.run({"pixels": x})["embedding"], want, rtol=TOL,
                               atol=TOL)

    cut = run_cli("convert", models.lrn_net(tmp_path / "lrn.pb"), "--split", "--outputs",
                  "Relu_1", "-o", tmp_path / "cut", "--verify")
    assert cut.exit_code == 0, cut.output
    cut_manifest = json.loads((tmp_path / "cut" / "pipeline.json").read_text())
    assert kinds(cut_manifest) == ["dialect", "onnx", "dialect"]
    assert [e["name"] for e in cut_manifest["outputs"]] == ["Relu_1"]
    assert "verification: MATCH" in cut.stdout


def test_dialect_segments_name_the_tensorflow_source_they_come_from(tmp_path):
    """Not the temporary ONNX file the core ops were written to."""
    from nhwc_onnx.serialize import load

    source, out, manifest, _ = split_cli(tmp_path, models.lrn_net)
    for seg in manifest["segments"]:
        if seg["kind"] == "dialect":
            metadata = load(out / seg["file"]).metadata
            assert metadata["source_framework"] == "tf"
            assert metadata["source_file"] == "model.pb"
