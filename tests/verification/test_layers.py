"""verify --layers: every tensor the source and the converted model both compute,
in graph order, for ONNX, Caffe, and TensorFlow .pb, Keras and SavedModel sources; a weight of
one convolution scaled in the converted file makes that convolution's output the first tensor
out of tolerance (and --bisect names the same node)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nhwc_onnx.serialize import load, save
from tests.verification.verify_models import (
    CAFFE_ARGS,
    CAFFE_CONV_B,
    CAFFE_SHARED,
    ONNX_CONV_B,
    ONNX_SHARED,
    caffe_net,
    keras_model,
    onnx_net,
    save_tf_formats,
    scale_conv_weight,
)

LAYER_KEYS = {"name", "source_name", "converted_name", "shape", "max_abs", "max_rel", "cosine",
              "ok"}


def _layers(run_cli, *args, exit_code=0):
    result = run_cli("verify", *args, "--layers", "--format", "json")
    assert result.exit_code == exit_code, result.output
    report = json.loads(result.stdout)
    for entry in report["layers"]:
        assert set(entry) >= LAYER_KEYS
    return report


def _producer(out, tensor: str) -> str:
    return next(n.name for n in load(out).graph.nodes
                if any(v.name == tensor for v in n.outputs))


def test_onnx_layers_list_every_shared_tensor_in_graph_order(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    report = _layers(run_cli, src, out)
    assert [e["converted_name"] for e in report["layers"]] == ONNX_SHARED
    assert [e["source_name"] for e in report["layers"]] == ONNX_SHARED
    assert all(e["ok"] for e in report["layers"]), report["layers"]
    by_name = {e["converted_name"]: e for e in report["layers"]}
    assert by_name["c1"]["shape"] == [2, 8, 11, 7]  # in the source's (NCHW) layout
    assert by_name["flat"]["shape"] == [2, 240]  # compared in the source's (C, H, W) order
    assert by_name["c1"]["name"] == "conv_a"
    assert all(e["max_abs"] < 1e-4 and e["cosine"] > 0.99999 for e in report["layers"])
    # text: a table with a row per tensor
    text = run_cli("verify", src, out, "--layers")
    assert text.exit_code == 0
    assert "layers: 7 tensors both models compute, all within tolerance" in text.stdout
    rows = [line.split() for line in text.stdout.splitlines() if line.startswith("  ok ")]
    assert [r[2] for r in rows[2:]] == ONNX_SHARED  # rows[:2]: the outputs' lines


def test_onnx_scaled_conv_weight_is_the_first_failing_tensor(run_cli, tmp_path):
    src = onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    bad = scale_conv_weight(out, _producer(out, ONNX_CONV_B), tmp_path / "bad.onnx")
    report = _layers(run_cli, src, bad, exit_code=3)
    oks = {e["converted_name"]: e["ok"] for e in report["layers"]}
    assert oks == {"c1": True, "r1": True, "c2": False, "r2": False, "flat": False, "y": False,
                   "y2": False}
    text = run_cli("verify", src, bad, "--layers", "--bisect")
    assert text.exit_code == 3
    marked = [line for line in text.stdout.splitlines() if "<- first out of tolerance" in line]
    assert len(marked) == 1 and " c2 " in marked[0] and marked[0].lstrip().startswith("BAD")
    assert "first divergence: node 'conv_b'" in text.stdout


def test_layers_cosine_of_a_negated_tensor_is_minus_one(run_cli, tmp_path):
    """conv_a has no bias: negating its weight in the converted file negates c1 exactly."""
    src = onnx_net(tmp_path / "net.onnx")
    out = tmp_path / "net.nhwc.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    model = load(out)
    weight = next(n for n in model.graph.nodes if n.name == "conv_a").inputs[1]
    weight.set_const(-np.asarray(weight.const))
    save(model, tmp_path / "negated.onnx")
    report = _layers(run_cli, src, tmp_path / "negated.onnx", exit_code=3)
    c1 = next(e for e in report["layers"] if e["converted_name"] == "c1")
    assert c1["cosine"] == pytest.approx(-1.0, abs=1e-6) and not c1["ok"]


def test_caffe_layers_follow_blob_versions_of_in_place_layers(run_cli, tmp_path):
    src = caffe_net(tmp_path / "net.prototxt")
    out = tmp_path / "net.onnx"
    result = run_cli("convert", src, "-o", out, *CAFFE_ARGS, "--verify", "--layers")
    assert result.exit_code == 0, result.output
    assert "layers: 5 tensors both models compute, all within tolerance" in result.stdout
    report = _layers(run_cli, src, out, *CAFFE_ARGS)
    assert [e["converted_name"] for e in report["layers"]] == CAFFE_SHARED
    assert all(e["ok"] for e in report["layers"]), report["layers"]
    bad = scale_conv_weight(out, _producer(out, CAFFE_CONV_B), tmp_path / "bad.onnx")
    report = _layers(run_cli, src, bad, *CAFFE_ARGS, exit_code=3)
    assert [e["ok"] for e in report["layers"]] == [True, True, False, False, False]


_CAFFE_HEAD = """
name: "n"
input: "data"
input_shape { dim: 2 dim: 3 dim: 9 dim: 7 }
"""


def _conv(name: str, bottom: str, top: str) -> str:
    return (f'layer {{ name: "{name}" type: "Convolution" bottom: "{bottom}" top: "{top}" '
            "convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }\n")


def _relu(name: str, blob: str) -> str:
    return f'layer {{ name: "{name}" type: "ReLU" bottom: "{blob}" top: "{blob}" }}\n'


def _caffe_layers(run_cli, tmp_path, text: str, *, scale: str | None = None):
    src = tmp_path / "net.prototxt"
    src.write_text(_CAFFE_HEAD + text)
    out = tmp_path / "net.onnx"
    assert run_cli("convert", src, "-o", out, *CAFFE_ARGS).exit_code == 0
    if scale is not None:
        out = scale_conv_weight(out, scale, tmp_path / "bad.onnx")
    report = _layers(run_cli, src, out, *CAFFE_ARGS, exit_code=0 if scale is None else 3)
    assert report["layers"] and not report.get("skipped_layers")
    return report


def test_caffe_layers_pair_in_place_layers_that_share_a_name(run_cli, tmp_path):
    """Three in-place ReLUs all named 'relu' on blobs of one shape: each version is compared
    with the output of its own layer in OpenCV (a pairing with another one's is BAD)."""
    text = (_conv("c1", "data", "c1") + _relu("relu", "c1") + _conv("c2", "c1", "c2")
            + _relu("relu", "c2") + _conv("c3", "c2", "c3") + _relu("relu", "c3")
            + 'layer { name: "fc" type: "InnerProduct" bottom: "c3" top: "fc" '
              "inner_product_param { num_output: 3 } }\n")
    report = _caffe_layers(run_cli, tmp_path, text)
    assert [e["converted_name"] for e in report["layers"]] == [
        "c1", "relu", "c2", "relu_1", "c3", "relu_2", "fc"]
    assert all(e["ok"] for e in report["layers"]), report["layers"]
    bad = _caffe_layers(run_cli, tmp_path, text, scale="c2")
    ok = {e["converted_name"]: e["ok"] for e in bad["layers"]}
    assert ok["c1"] and ok["relu"] and not ok["c2"] and not ok["relu_1"]
    assert bad["layers"][2]["converted_name"] == "c2"


def test_caffe_layers_pair_a_layer_named_like_a_later_blob(run_cli, tmp_path):
    """An in-place ReLU named 'pool' before the Pooling layer 'pool' whose top is 'pool'."""
    text = (_conv("c1", "data", "c1") + _relu("pool", "c1")
            + 'layer { name: "pool" type: "Pooling" bottom: "c1" top: "pool" '
              "pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
            + _conv("c2", "pool", "c2") + _relu("c2", "c2"))
    report = _caffe_layers(run_cli, tmp_path, text)
    rows = [(e["converted_name"], e["op"]) for e in report["layers"]]
    assert rows[:3] == [("c1", "Conv"), ("pool", "Relu"), ("pool_1", "MaxPool")], rows
    assert len(rows) == 5 and all(e["ok"] for e in report["layers"]), report["layers"]


def test_caffe_flatten_of_a_map_the_source_permuted_to_nhwc_compares_as_stored(run_cli,
                                                                              tmp_path):
    """An SSD head: Permute(0,2,3,1) then Flatten. The dialect drops the Permute (the map is
    stored NHWC already) and flattens the stored bytes, which is what the source flattens; the
    Flatten of a map the source keeps NCHW (a classifier's; the ONNX tests have one that stays
    a tensor) reads in the other order. Both compare within tolerance (the SSD one was
    reported BAD, cosine ~0, though the outputs matched)."""
    text = (_conv("c1", "data", "c1")
            + 'layer { name: "perm" type: "Permute" bottom: "c1" top: "perm" '
              "permute_param { order: 0 order: 2 order: 3 order: 1 } }\n"
            + 'layer { name: "loc" type: "Flatten" bottom: "perm" top: "loc" }\n'
            + 'layer { name: "feat" type: "Flatten" bottom: "c1" top: "feat" }\n'
            + 'layer { name: "fc" type: "InnerProduct" bottom: "feat" top: "fc" '
              "inner_product_param { num_output: 3 } }\n")
    report = _caffe_layers(run_cli, tmp_path, text)
    rows = {e["converted_name"]: e["ok"] for e in report["layers"]}
    assert {"loc", "fc"} <= set(rows), rows
    assert all(rows.values()), report["layers"]


def test_caffe_layers_fetch_a_convolution_named_unlike_its_top(run_cli, tmp_path):
    """OpenCV names a Convolution layer after its top: fetched by its own identity layer."""
    text = _conv("conv1", "data", "c1") + _relu("r", "c1") + _conv("conv2", "c1", "c2")
    report = _caffe_layers(run_cli, tmp_path, text)
    assert [e["name"] for e in report["layers"]] == ["conv1", "r", "conv2"]
    assert all(e["ok"] for e in report["layers"]), report["layers"]


@pytest.fixture(scope="module")
def tf_sources(tmp_path_factory):
    import tensorflow as tf

    return save_tf_formats(tf, keras_model(tf), tmp_path_factory.mktemp("tf_layers"))


def _tf_node_names(path) -> set[str]:
    """The tensors TensorFlow itself computes: nodes of the frozen graph, read with TF."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    if str(path).endswith(".pb"):
        graph_def = tf.compat.v1.GraphDef()
        graph_def.ParseFromString(path.read_bytes())
    elif str(path).endswith(".keras"):
        model = tf.keras.models.load_model(path, compile=False)
        spec = [tf.TensorSpec(t.shape, t.dtype) for t in model.inputs]
        function = tf.function(lambda x: model(x, training=False)).get_concrete_function(*spec)
        graph_def = convert_variables_to_constants_v2(function).graph.as_graph_def()
    else:
        loaded = tf.saved_model.load(str(path))  # the signature needs it alive
        function = loaded.signatures["serving_default"]
        graph_def = convert_variables_to_constants_v2(function).graph.as_graph_def()
    return {n.name for n in graph_def.node}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["pb", "keras", "savedmodel"])
def test_tf_layers_list_every_shared_tensor_and_find_the_scaled_conv(run_cli, tf_sources,
                                                                     tmp_path, fmt):
    src = tf_sources[fmt]
    out = tmp_path / "m.onnx"
    assert run_cli("convert", src, "-o", out).exit_code == 0
    report = _layers(run_cli, src, out)
    layers = report["layers"]
    assert all(e["ok"] for e in layers), layers
    # every converted tensor whose name TensorFlow's graph also has (the graph output under
    # its recorded source name) is listed, each once
    model = load(out)
    computed = [v.name for n in model.graph.nodes for v in n.outputs]
    tf_nodes = _tf_node_names(src)
    outputs = {v.name for v in model.graph.outputs}
    expected = {name for name in computed if name in tf_nodes or name in outputs}
    assert {e["converted_name"] for e in layers} == expected
    assert len(layers) == len(expected) >= 4
    order = [next(i for i, e in enumerate(layers) if f"/{key}" in e["source_name"])
             for key in ("conv_a", "relu", "conv_b")]
    assert order == sorted(order)  # graph order
    conv_b = next(n for n in model.graph.nodes if n.op == "Conv" and "conv_b" in n.name)
    bad = scale_conv_weight(out, conv_b.name, tmp_path / "bad.onnx")
    report = _layers(run_cli, src, bad, exit_code=3)
    first = next(e for e in report["layers"] if not e["ok"])
    assert first["name"] == conv_b.name
    assert first["converted_name"] == conv_b.outputs[0].name
    before = report["layers"][:report["layers"].index(first)]
    assert before and all(e["ok"] for e in before)


def test_layers_cost_no_conversion_and_one_extra_run_of_each_model(tmp_path, monkeypatch):
    """--layers runs each model once more (with the shared tensors exposed) per sample."""
    import nhwc_onnx
    import nhwc_onnx.frontends.onnx.reference as onnx_reference
    from nhwc_onnx import runtime

    src = onnx_net(tmp_path / "net.onnx")
    model = nhwc_onnx.convert(src).model
    calls = {"ours": 0, "source": 0, "convert": 0}
    real_run, real_source = runtime.run, onnx_reference.SourceReference.run

    def count(key, fn):
        def wrapped(*args, **kwargs):
            calls[key] += 1
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(runtime, "run", count("ours", real_run))
    monkeypatch.setattr(onnx_reference.SourceReference, "run", count("source", real_source))
    from nhwc_onnx.conversion import convert as conversion

    monkeypatch.setattr(conversion, "convert", count("convert", conversion.convert))
    report = nhwc_onnx.verify(src, model, layers=True, samples=2)
    assert report.ok and len(report.layers) == len(ONNX_SHARED)
    assert calls == {"ours": 4, "source": 4, "convert": 0}


def test_in_memory_and_file_verification_agree(run_cli, tmp_path):
    """convert --verify --layers (the model in memory) reports what verify of the file does."""
    import nhwc_onnx

    src = onnx_net(tmp_path / "net.onnx")
    result = nhwc_onnx.convert(src, tmp_path / "out.onnx")
    in_memory = nhwc_onnx.verify(src, result.model, layers=True)
    from_file = nhwc_onnx.verify(src, tmp_path / "out.onnx", layers=True)
    assert [c.to_dict() for c in in_memory.layers] == [c.to_dict() for c in from_file.layers]
    np.testing.assert_equal(len(in_memory.layers), len(ONNX_SHARED))


def test_a_report_with_layers_and_samples_follows_the_schema(run_cli, tmp_path):
    import jsonschema

    from tests.cli.conftest import REPO

    src = onnx_net(tmp_path / "net.onnx")
    report = tmp_path / "report.json"
    result = run_cli("convert", src, "-o", tmp_path / "out.onnx", "--verify", "--layers",
                     "--samples", "2", "--report", report)
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    schema = json.loads((REPO / "docs" / "report-schema.json").read_text())
    jsonschema.validate(data, schema)
    assert data["verification"]["samples"] == 2
    assert len(data["verification"]["layers"]) == len(ONNX_SHARED)
    broken = json.loads(report.read_text())
    del broken["verification"]["layers"][0]["converted_name"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
