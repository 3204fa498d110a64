"""convert --split on ONNX sources the dialect refuses in part: the pipeline folder, its
segments' kinds, and its outputs against onnxruntime running the source (1e-4), through the
command line (convert, check, run, verify, info, lower) and the Python API."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from nhwc_onnx import pipeline as pipelines
from nhwc_onnx.api import convert
from tests.cli_runner import run_cli
from tests.pipeline import models
from tests.pipeline.splitting import built_and_split, kinds

TOL = 1e-4
REPO = Path(__file__).resolve().parents[2]


def source_outputs(path, feeds: dict) -> dict:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def random_feeds(path, batch: int | None = None, seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in onnx.load(str(path)).graph.input:
        dims = [batch if d.dim_param else d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def assert_pipeline_matches_source(folder, source, batch: int | None = None) -> None:
    """The saved pipeline, run on random inputs permuted as the manifest says, computes the
    source's outputs (onnxruntime on the source file)."""
    loaded = pipelines.load(folder)
    feeds = random_feeds(source, batch)
    expected = source_outputs(source, feeds)
    ins = {e.name: e for e in loaded.manifest.inputs}
    got = loaded.run({n: np.ascontiguousarray(x.transpose(ins[n].permutation))
                      if ins[n].permutation else x for n, x in feeds.items()})
    assert [e.name for e in loaded.manifest.outputs] == list(expected)
    for e in loaded.manifest.outputs:
        have = got[e.name]
        if e.permutation:
            have = have.transpose(np.argsort(e.permutation))
        want = expected[e.name]
        assert have.shape == want.shape
        np.testing.assert_allclose(have, want, rtol=TOL, atol=TOL * np.abs(want).max(),
                                   err_msg=e.name)


def split_cli(tmp_path, build, *extra):
    return built_and_split(tmp_path, build, "model.onnx", *extra)


# -- the model families -------------------------------------------------------------------------


def test_l2_normalised_embedder_splits_into_a_dialect_body_and_a_standard_tail(tmp_path):
    source, out, manifest, result = split_cli(tmp_path, models.l2_embedder, "--verify",
                                              "--layers")
    assert kinds(manifest) == ["dialect", "onnx"]
    assert manifest["inputs"][0]["permutation"] == [0, 2, 3, 1]
    assert manifest["inputs"][0]["shape"] == [models.N, models.H, models.W, models.C]
    assert "verification: MATCH" in result.stdout
    assert "2 segment(s) (1 dialect, 1 standard ONNX), 100.0% of" in result.stdout
    # the standard segment is the source's own nodes (the refused ReduceL2 and Div among them)
    tail = onnx.load(str(out / manifest["segments"][1]["file"]))
    assert {"ReduceL2", "Div"} <= {n.op_type for n in tail.graph.node}
    assert not any(n.domain == "nhwc" for n in tail.graph.node)
    assert_pipeline_matches_source(out, source)


@pytest.mark.parametrize("build", [models.vit_block, models.convnext_block],
                         ids=["vit", "convnext"])
def test_transformer_style_blocks_alternate_dialect_and_standard_segments(tmp_path, build):
    source, out, manifest, _ = split_cli(tmp_path, build)
    found = kinds(manifest)
    # dialect first and last, never two segments of one kind side by side
    assert found[0] == found[-1] == "dialect" and "onnx" in found
    assert all(a != b for a, b in itertools.pairwise(found))
    standard_ops = set()
    for segment in manifest["segments"]:
        if segment["kind"] == "onnx":
            standard_ops |= {n.op_type for n in onnx.load(str(out / segment["file"])).graph.node}
    assert {"LayerNormalization", "Erf"} <= standard_ops
    # every Linear (a MatMul on tokens or on a channels-last map) runs in a dialect segment:
    # a value the dialect would store NHWC is passed in the source's axis order instead
    assert "MatMul" not in standard_ops
    assert all(s["macs"] == 0 for s in manifest["segments"] if s["kind"] == "onnx")
    assert_pipeline_matches_source(out, source)


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_recurrent_layer_after_a_conv_front_runs_standard(tmp_path, cell):
    source, out, manifest, _ = split_cli(tmp_path, lambda p: models.conv_lstm(p, cell))
    # conv front, the recurrent cell, then the per-step classifier (a MatMul on the rank-3
    # sequence: a Dense in the dialect)
    assert kinds(manifest) == ["dialect", "onnx", "dialect"]
    standard = onnx.load(str(out / manifest["segments"][1]["file"]))
    assert cell in {n.op_type for n in standard.graph.node}
    assert "MatMul" not in {n.op_type for n in standard.graph.node}
    # the conv front's output reaches the standard segment through a Transpose back to NCHW
    assert standard.graph.node[0].op_type == "Transpose"
    # per sample: the classifier's 6->5 per time step (9 steps) in the last dialect segment
    assert manifest["segments"][2]["macs"] == models.W * 6 * 5
    assert_pipeline_matches_source(out, source)


def test_log_mel_front_stays_standard_with_its_expressible_ops(tmp_path):
    source, out, manifest, result = split_cli(tmp_path, models.log_mel_cnn)
    assert kinds(manifest) == ["onnx", "dialect"]
    # Pow and Add before the refused Log move no MACs: they stay standard, said so
    assert manifest["inputs"][0]["permutation"] is None
    assert any("Add x1, Pow x1" in n for n in manifest["notes"])
    assert "note:" in result.stdout
    front = onnx.load(str(out / manifest["segments"][0]["file"]))
    assert {"Pow", "Add", "Log"} <= {n.op_type for n in front.graph.node}
    assert "MatMul" not in {n.op_type for n in front.graph.node}
    # the filterbank MatMul after the Log runs in the dialect: all MACs are there
    assert manifest["segments"][0]["macs"] == 0
    assert manifest["segments"][1]["macs"] > 0
    assert_pipeline_matches_source(out, source)


def test_mel_filterbank_before_the_log_runs_in_the_dialect(tmp_path):
    source, out, manifest, _ = split_cli(tmp_path, models.mel_then_log_cnn)
    assert kinds(manifest) == ["dialect", "onnx", "dialect"]
    ops = [{n.op_type for n in onnx.load(str(out / s["file"])).graph.node}
           for s in manifest["segments"]]
    assert "Log" in ops[1] and not ops[1] & {"MatMul", "Conv", "Pow"}
    # per sample: the filterbank's 9 frames x 10 mels x 12 frequencies
    assert manifest["segments"][0]["macs"] == models.W * 10 * 12
    assert manifest["segments"][1]["macs"] == 0
    assert_pipeline_matches_source(out, source)


def test_lrn_net_alternates_five_segments(tmp_path):
    source, out, manifest, _ = split_cli(tmp_path, models.lrn_net)
    assert kinds(manifest) == ["dialect", "onnx", "dialect", "onnx", "dialect"]
    assert_pipeline_matches_source(out, source)


def test_symbolic_batch_split_runs_at_batch_1_3_and_17(tmp_path):
    source, out, manifest, _ = split_cli(tmp_path, lambda p: models.l2_embedder(p, "batch"))
    assert kinds(manifest) == ["dialect", "onnx"]
    assert manifest["inputs"][0]["shape"] == ["batch", models.H, models.W, models.C]
    assert isinstance(manifest["segments"][0]["outputs"][0]["shape"][0], str)
    for batch in (1, 3, 17):
        assert_pipeline_matches_source(out, source, batch)
    verified = run_cli("verify", source, out)
    assert verified.exit_code == 0, verified.output
    assert "the symbolic batch at 1, 3 and 17" in verified.stdout


def test_model_that_converts_whole_is_one_dialect_segment_with_plain_convert_bytes(tmp_path):
    source, out, manifest, _ = split_cli(tmp_path, models.whole_net, "--report",
                                         tmp_path / "report.json")
    assert kinds(manifest) == ["dialect"]
    # the report (checked against docs/report-schema.json) holds the one segment's conversion
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "split" and report["conversion"]["framework"] == "onnx"
    plain = tmp_path / "plain.onnx"
    assert run_cli("convert", source, "-o", plain).exit_code == 0
    assert (out / manifest["segments"][0]["file"]).read_bytes() == plain.read_bytes()
    assert_pipeline_matches_source(out, source)


def test_every_family_splits_and_matches(tmp_path):
    """The count of the families above that split and match: all eight."""
    builds = [models.l2_embedder, models.vit_block, models.convnext_block, models.conv_lstm,
              models.log_mel_cnn, models.mel_then_log_cnn, models.lrn_net, models.whole_net]
    matched = 0
    for i, build in enumerate(builds):
        source = build(tmp_path / f"m{i}.onnx")
        pipeline = convert(source, tmp_path / f"m{i}", split=True)
        assert pipeline.verify(source).ok
        matched += 1
    assert matched == 8


# -- the commands on a pipeline -----------------------------------------------------------------


def test_run_info_verify_and_lower_take_the_pipeline_folder(tmp_path):
    source, out, _manifest, _ = split_cli(tmp_path, models.lrn_net)
    feeds = random_feeds(source)
    x = feeds["input"].transpose(0, 2, 3, 1)
    np.save(tmp_path / "x.npy", np.ascontiguousarray(x))
    ran = run_cli("run", out, "--input", f"input={tmp_path / 'x.npy'}", "--output-dir",
                  tmp_path / "outs")
    assert ran.exit_code == 0, ran.output
    want = source_outputs(source, feeds)["prob"]
    np.testing.assert_allclose(np.load(tmp_path / "outs" / "prob.npy"), want, rtol=TOL,
                               atol=TOL)
    info = run_cli("info", out)
    assert info.exit_code == 0, info.output
    assert "5 segment(s) (3 dialect, 2 standard ONNX)" in info.stdout
    assert info.stdout.count("  segment ") == 5
    verified = run_cli("verify", source, out / "pipeline.json", "--layers")
    assert verified.exit_code == 0, verified.output
    assert "layers: 4 tensors both models compute, all within tolerance" in verified.stdout
    lowered = tmp_path / "whole.onnx"
    low = run_cli("lower", out, "-o", lowered)
    assert low.exit_code == 0, low.output
    session = ort.InferenceSession(str(lowered), providers=["CPUExecutionProvider"])
    (got,) = session.run(["prob"], {"input": np.ascontiguousarray(x)})
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)


def test_python_api_split_returns_a_pipeline_that_saves_runs_and_verifies(tmp_path):
    source = models.l2_embedder(tmp_path / "m.onnx")
    pipeline = convert(source, split=True)
    assert [s.kind for s in pipeline.segments] == ["dialect", "onnx"]
    report = pipeline.verify(source, layers=True)
    assert report.ok and len(report.layers) == 1
    feeds = random_feeds(source)
    got = pipeline.run({"input": np.ascontiguousarray(feeds["input"].transpose(0, 2, 3, 1))})
    np.testing.assert_allclose(got["embedding"], source_outputs(source, feeds)["embedding"],
                               rtol=TOL, atol=TOL)
    folder = pipeline.save(tmp_path / "saved")
    assert sorted(p.name for p in folder.iterdir()) == ["00_dialect.onnx", "01_onnx.onnx",
                                                        "pipeline.json"]
    costs = pipeline.costs()
    assert costs["dialect_mac_share"] == 1.0 and costs["macs"] > 0
    assert costs["bytes_between_segments_per_sample"] == 7 * 4  # the 7-float embedding


# -- writing: all or nothing, never a foreign file -----------------------------------------------


def test_failed_verification_writes_no_pipeline(tmp_path):
    source = models.lrn_net(tmp_path / "m.onnx")
    out = tmp_path / "out"
    result = run_cli("convert", source, "--split", "-o", out, "--verify", "--atol", "0",
                     "--rtol", "0")
    assert result.exit_code == 3, result.output
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]  # no temp folder left


def test_split_never_replaces_a_folder_that_is_not_a_pipeline(tmp_path):
    source = models.l2_embedder(tmp_path / "m.onnx")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = run_cli("convert", source, "--split", "-o", out)
    assert result.exit_code == 1, result.output
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "out"]


def test_split_replaces_its_own_earlier_pipeline(tmp_path):
    first = models.lrn_net(tmp_path / "a.onnx")
    second = models.l2_embedder(tmp_path / "b.onnx")
    out = tmp_path / "out"
    assert run_cli("convert", first, "--split", "-o", out).exit_code == 0
    assert len(list(out.iterdir())) == 6
    assert run_cli("convert", second, "--split", "-o", out).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == ["00_dialect.onnx", "01_onnx.onnx",
                                                     "pipeline.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.onnx", "b.onnx", "out"]


def test_split_with_several_sources_is_a_usage_error(tmp_path):
    source = models.l2_embedder(tmp_path / "m.onnx")
    result = run_cli("convert", source, source, "--split", "--output-dir", tmp_path / "o")
    assert result.exit_code == 2
    assert not (tmp_path / "o").exists()


def test_written_manifests_follow_the_published_schema(tmp_path):
    import jsonschema

    schema = json.loads((REPO / "docs" / "pipeline-schema.json").read_text())
    for build in (models.lrn_net, models.whole_net, lambda p: models.l2_embedder(p, "batch")):
        _, _, manifest, _ = split_cli(tmp_path / build.__name__, build)
        jsonschema.validate(manifest, schema)
    broken = dict(manifest, segments=[dict(manifest["segments"][0], kind="npu")])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_renamed_inputs_and_outputs_name_the_pipeline_and_verify_maps_them_back(tmp_path):
    source, out, manifest, result = split_cli(
        tmp_path, models.l2_embedder, "--rename", "input=image", "--rename",
        "embedding=vector", "--verify")
    assert "verification: MATCH" in result.stdout
    assert kinds(manifest) == ["dialect", "onnx"]
    assert [e["name"] for e in manifest["inputs"]] == ["image"]
    assert [e["name"] for e in manifest["outputs"]] == ["vector"]
    assert manifest["source_names"] == {"image": "input", "vector": "embedding"}
    verified = run_cli("verify", source, out)
    assert verified.exit_code == 0, verified.output


def test_split_of_the_part_between_inputs_and_outputs(tmp_path):
    # from the first LRN's output on: the cut's input is an internal tensor (NCHW in the
    # source, fed NHWC to the dialect segment that reads it)
    _, _, manifest, result = split_cli(
        tmp_path, models.lrn_net, "--inputs", "norm1_out", "--input-shape",
        f"norm1_out={models.N},8,{models.H},{models.W}", "--verify")
    assert "verification: MATCH" in result.stdout
    assert kinds(manifest) == ["dialect", "onnx", "dialect"]
    assert manifest["inputs"][0]["name"] == "norm1_out"


def test_preprocessing_of_an_input_a_standard_segment_reads_is_a_usage_error(tmp_path):
    source = models.log_mel_cnn(tmp_path / "m.onnx")
    result = run_cli("convert", source, "--split", "-o", tmp_path / "out", "--mean", "1")
    assert result.exit_code == 2
    assert "apply to inputs only dialect segments read" in result.stderr
    assert not (tmp_path / "out").exists()


def test_preprocessing_embedded_in_the_first_dialect_segment_verifies(tmp_path):
    _, _, manifest, result = split_cli(tmp_path, models.l2_embedder, "--mean", "1,2,3",
                                       "--std", "2,4,8", "--reverse-channels", "--verify")
    assert "verification: MATCH" in result.stdout
    assert kinds(manifest) == ["dialect", "onnx"]


# -- cost in the open ---------------------------------------------------------------------------

# models.l2_embedder per sample, counted by hand: conv1 3x3 3->8 on 11x9 (8*99*27), conv2 3x3
# 8->12 stride 2 to 6x5 (12*30*72), the 12->7 head (84)
L2_EMBEDDER_MACS = 8 * 99 * 27 + 12 * 30 * 72 + 84


def test_info_gives_macs_per_sample_of_source_dialect_model_and_pipeline(tmp_path):
    source, out, manifest, _ = split_cli(tmp_path, models.l2_embedder)
    line = f"cost: {L2_EMBEDDER_MACS:,} MACs per sample"
    assert line in run_cli("info", source).stdout
    assert line in run_cli("info", out / manifest["segments"][0]["file"]).stdout
    assert f"100.0% of {L2_EMBEDDER_MACS:,} MACs in dialect segments, 28 bytes passed" in \
        run_cli("info", out).stdout
    assert [s["macs"] for s in manifest["segments"]] == [L2_EMBEDDER_MACS, 0]


def test_symbolic_batch_costs_are_per_sample_too(tmp_path):
    _, out, manifest, _ = split_cli(tmp_path, lambda p: models.l2_embedder(p, "batch"))
    assert [s["macs"] for s in manifest["segments"]] == [L2_EMBEDDER_MACS, 0]
    assert "28 bytes passed between segments per sample" in run_cli("info", out).stdout


@pytest.mark.parametrize(("build", "segments"), [
    (models.l2_embedder, "2 segment(s) (1 dialect, 1 standard ONNX), 100.0% of MACs"),
    (models.lrn_net, "5 segment(s) (3 dialect, 2 standard ONNX), 100.0% of MACs"),
    (models.log_mel_cnn, "2 segment(s) (1 dialect, 1 standard ONNX), 100.0% of MACs"),
    # per sample: conv1 4*108*9 and the classifier 9*6*5 in dialect segments, the LSTM's
    # 9 steps of 4 gates * 6 * (12 + 6) standard: 4,158 of 8,046
    (models.conv_lstm, "3 segment(s) (2 dialect, 1 standard ONNX), 51.7% of MACs")])
def test_refusal_says_in_one_line_how_the_model_would_split(tmp_path, build, segments):
    source = build(tmp_path / "m.onnx")
    result = run_cli("convert", source, "-o", tmp_path / "m_nhwc.onnx")
    assert result.exit_code == 1
    lines = [x for x in result.stderr.splitlines() if x.startswith("with --split")]
    assert lines == [(f"with --split (estimated from these refusals): {segments} in dialect "
                     "segments")]
    assert not (tmp_path / "m_nhwc.onnx").exists()


@pytest.mark.parametrize(("build", "expected"), [
    (models.log_mel_cnn, ["onnx", "dialect"]),
    (models.lrn_net, ["dialect", "onnx", "dialect", "onnx", "dialect"]),
    # the Linear layers between LayerNorm, GELU (Erf) and LayerNorm move MACs: dialect
    (models.vit_block, ["dialect", "onnx", "dialect", "onnx", "dialect", "onnx", "dialect"]),
    (models.convnext_block, ["dialect", "onnx", "dialect", "onnx", "dialect"]),
    # shapes after the contrib op come from onnxruntime, also where the output declares the
    # batch by name
    (models.contrib_gelu_net, ["dialect", "onnx", "dialect", "onnx", "dialect"])],
    ids=["log_mel", "lrn", "vit", "convnext", "contrib_op"])
def test_symbolic_batch_families_run_at_batch_1_and_3(tmp_path, build, expected):
    source, out, manifest, _ = split_cli(
        tmp_path, lambda p: models.with_symbolic_batch(build(p)))
    assert kinds(manifest) == expected
    passed = [e for s in manifest["segments"] for e in s["inputs"]
              if e["name"] != manifest["inputs"][0]["name"]]
    assert passed and all(e["shape"][0] == "batch" or isinstance(e["shape"][0], str)
                          for e in passed)
    for batch in (1, 3):
        assert_pipeline_matches_source(out, source, batch)


def test_split_report_names_segments_costs_and_refused_nodes(tmp_path):
    _, out, manifest, _ = split_cli(tmp_path, models.l2_embedder, "--report",
                                    tmp_path / "report.json", "--verify")
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "split"
    assert report["output"] == str(out)
    assert report["pipeline"] == manifest
    # the Shape feeding the Expand is refused once it would be a dialect output (int64)
    assert report["refused"] == ["normalize/div", "normalize/norm", "normalize/shape"]
    assert report["macs"] == L2_EMBEDDER_MACS and report["dialect_mac_share"] == 1.0
    assert report["segments_by_kind"] == {"dialect": 1, "onnx": 1}
    assert report["verification"]["ok"] is True


def test_interrupted_save_keeps_the_earlier_pipeline_and_leaves_no_temp_folder(
        tmp_path, monkeypatch):
    import nhwc_onnx.serialize

    first = models.lrn_net(tmp_path / "a.onnx")
    out = tmp_path / "out"
    convert(first, out, split=True)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    pipeline = convert(models.l2_embedder(tmp_path / "b.onnx"), split=True)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(nhwc_onnx.serialize, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pipeline.save(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.onnx", "b.onnx", "out"]


def test_caffe_preprocessing_that_a_standard_segment_would_compute_is_a_usage_error(tmp_path):
    """--strict refuses the division by --std (it rounds differently), so the input and its
    preprocessing would run standard: --mean and --std apply to dialect inputs only."""
    out = tmp_path / "out"
    result = run_cli("convert", REPO / "examples/caffe/tiny_net.prototxt", "--weights",
                     REPO / "examples/caffe/tiny_net.caffemodel", "--mean", "104,117,123",
                     "--std", "58,57,57", "--strict", "--split", "-o", out)
    assert result.exit_code == 2
    assert ("'data' is read by a standard segment of the split: --mean, --std and "
            "--reverse-channels apply to inputs only dialect segments read") in result.stderr
    assert not out.exists()


def test_op_of_another_domain_runs_in_its_standard_segment(tmp_path):
    source, out, manifest, _ = split_cli(tmp_path, models.contrib_gelu_net)
    # conv2 after the Gelu is dialect although the whole conversion refused it (ONNX's shape
    # inference cannot type the contrib op's output); the pooling after it is still refused
    # by the ONNX frontend for the same reason, so five segments, not three
    assert kinds(manifest) == ["dialect", "onnx", "dialect", "onnx", "dialect"]
    standard = onnx.load(str(out / manifest["segments"][1]["file"]))
    assert [(n.domain, n.op_type) for n in standard.graph.node
            if n.op_type != "Transpose"] == [("com.microsoft", "Gelu")]
    assert {"", "com.microsoft"} <= {o.domain for o in standard.opset_import}
    assert_pipeline_matches_source(out, source)


def test_verify_html_and_run_intermediate_take_a_pipeline(tmp_path):
    source, out, _, _ = split_cli(tmp_path, models.lrn_net)
    page = tmp_path / "page.html"
    verified = run_cli("verify", source, out, "--html", page)
    assert verified.exit_code == 0, verified.output
    text = page.read_text()
    assert "MATCH" in text and "norm2_out" in text
    ran = run_cli("run", out, "--random", "--intermediate", "norm1_out", "-o", tmp_path / "o")
    assert ran.exit_code == 0, ran.output
    # run's --random: seed 0, standard normal, in the pipeline's (NHWC) layout
    rng = np.random.default_rng(0)
    x = rng.standard_normal((models.N, models.H, models.W, models.C)).astype(np.float32)
    want = source_outputs_with(source, {"input": x.transpose(0, 3, 1, 2)}, "norm1_out")
    np.testing.assert_allclose(np.load(tmp_path / "o" / "norm1_out.npy"),
                               want.transpose(0, 2, 3, 1), rtol=TOL, atol=TOL)


def source_outputs_with(path, feeds: dict, tensor: str) -> np.ndarray:
    """onnxruntime's value of an internal tensor of the source."""
    model = onnx.load(str(path))
    model.graph.output.append(onnx.ValueInfoProto(name=tensor))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run([tensor], feeds)[0]


def test_kept_layout_input_is_read_by_a_standard_segment_not_a_transpose(tmp_path):
    # the dialect cannot read an NCHW image without a layout Transpose: the conv that reads
    # it runs standard, and the boundary after it is NHWC
    source, out, manifest, result = split_cli(tmp_path, models.l2_embedder, "--keep-layout",
                                              "input", "--verify")
    assert "verification: MATCH" in result.stdout
    assert kinds(manifest) == ["onnx", "dialect", "onnx"]
    assert manifest["inputs"][0]["permutation"] is None
    assert manifest["inputs"][0]["shape"] == [models.N, models.C, models.H, models.W]
    assert manifest["segments"][1]["inputs"][0]["permutation"] == [0, 2, 3, 1]
    assert_pipeline_matches_source(out, source)
