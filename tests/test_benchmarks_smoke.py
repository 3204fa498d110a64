"""The benchmark harness's pure parts: statistics, commands, target checks, table, Caffe writer.

No timings are asserted; the one real process measured is a tiny Python that allocates a known
amount of memory, to prove the RSS reading is the child's own.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


run = _load("run")
caffe_models = _load("caffe_models")


def test_summarize_odd_even_and_empty():
    assert run.summarize([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert run.summarize([4.0, 1.0, 2.0, 10.0])["median"] == 3.0
    assert run.summarize([]) == {"median": None, "min": None, "max": None, "n": 0}


def test_ratio_handles_missing_values():
    assert run.ratio(3.0, 2.0) == 1.5
    assert run.ratio(None, 2.0) is None
    assert run.ratio(1.0, 0.0) is None


def test_schedule_rotates_and_reverses():
    tools = ["ours", "floor", "ovc", "tf2onnx"]
    rounds = run.schedule(tools, 8)
    assert rounds[:4] == [tools, tools[::-1], ["floor", "ovc", "tf2onnx", "ours"],
                          ["ours", "tf2onnx", "ovc", "floor"]]
    assert all(sorted(r) == sorted(tools) for r in rounds)
    # ours must not always follow the same tool in the timed rounds (1..)
    before = {r[r.index("ours") - 1] for r in rounds[1:] if r.index("ours") > 0}
    assert len(before) >= 2
    assert run.schedule([], 2) == [[], []]


TF_MODEL = {"name": "m", "framework": "tf", "source": "/x/m.pb", "weights": "",
            "inputs": ["input:0"], "outputs": ["Identity:0", "Identity_1:0"]}
CAFFE_MODEL = {"name": "c", "framework": "caffe", "source": "/x/d.prototxt",
               "weights": "/x/w.caffemodel", "inputs": ["data"], "outputs": ["prob"]}


def test_commands():
    bin_dir = Path("/b")
    assert run.ours_command(TF_MODEL, Path("/o/m.onnx"), bin_dir) == [
        "/b/nhwc-onnx", "convert", "/x/m.pb", "-o", "/o/m.onnx"]
    api = run.ours_command(CAFFE_MODEL, Path("/o/m.onnx"), bin_dir, via="api")
    assert api[0] == "/b/python" and api[-3:] == ["/x/d.prototxt", "/o/m.onnx", "/x/w.caffemodel"]
    assert run.ours_command(CAFFE_MODEL, Path("/o/m.onnx"), bin_dir)[-2:] == [
        "--weights", "/x/w.caffemodel"]
    tf2onnx = run.tf2onnx_command(TF_MODEL, Path("/o/t.onnx"), bin_dir)
    assert tf2onnx[:3] == ["/b/python", "-m", "tf2onnx.convert"]
    assert tf2onnx[tf2onnx.index("--outputs") + 1] == "Identity:0,Identity_1:0"
    assert run.tf2onnx_command(CAFFE_MODEL, Path("/o/t.onnx"), bin_dir) is None
    assert run.ovc_command(CAFFE_MODEL, Path("/o"), bin_dir) is None
    assert run.ovc_command(TF_MODEL, Path("/o"), bin_dir) == [
        "/b/ovc", "/x/m.pb", "--output_model", "/o/model.xml"]
    floor = run.floor_command(Path("/o/ours.onnx"), Path("/o/f.onnx"), bin_dir)
    assert floor[0] == "/b/python" and floor[-2:] == ["/o/ours.onnx", "/o/f.onnx"]


def _tool(seconds: list[float], rss_kb: list[int], error: str = "") -> dict:
    return {"seconds": run.summarize(seconds), "rss_kb": run.summarize(rss_kb), "error": error,
            "samples": [{}] * len(seconds)}


def test_target_checks_time_rss_floor_and_ovc():
    mb = 1024  # kB
    size = 100 * 1024 * 1024  # RSS limit: 1.5 x 100 MB + 100 MB = 250 MB
    tools = {"ours": _tool([0.5, 0.6, 0.4], [250 * mb]), "floor": _tool([0.4], [150 * mb]),
             "ovc": _tool([1.5], [300 * mb])}
    checks = run.target_checks("keras_resnet50", tools, size)
    assert checks == {"<= 0.6 s": True, "RSS <= 1.5x+100MB": True, "<= 1.5x floor": True,
                      "<= 0.4x ovc": True}
    tools["ours"] = _tool([0.7], [251 * mb])
    checks = run.target_checks("keras_resnet50", tools, size)
    assert checks == {"<= 0.6 s": False, "RSS <= 1.5x+100MB": False, "<= 1.5x floor": False,
                      "<= 0.4x ovc": False}
    # a model without absolute targets still gets the floor and RSS rules; a failed ovc none
    tools["ovc"] = _tool([], [], error="exit 1: boom")
    assert run.target_checks("onnx_resnet50", tools, size) == {
        "RSS <= 1.5x+100MB": False, "<= 1.5x floor": False}
    assert run.target_checks("keras_resnet50", {"ours": _tool([], [])}, 1) == {}


def test_command_checks_time_and_rss_per_file_size():
    size = 100 * 1024 * 1024
    ok = run.command_checks("check_100mb", _tool([0.25], [110 * 1024]), size)
    assert ok == {"<= 0.3 s": True, "RSS <= 1.2x file": True}
    slow = run.command_checks("check_100mb", _tool([0.35], [130 * 1024]), size)
    assert slow == {"<= 0.3 s": False, "RSS <= 1.2x file": False}
    assert run.command_checks("help", _tool([0.2], [16 * 1024]), 0) == {"<= 0.15 s": False}
    assert run.command_checks("help", _tool([], []), 0) == {}


def test_markdown_table_rows_and_ratios():
    results = {
        "date": "2026-01-01 00:00 UTC", "runs": 3,
        "machine": {"cpu": "Test CPU", "cores": 2, "ram_gb": 8.0, "python": "3.11"},
        "models": {
            "keras_mobilenetv2": {
                "bytes": 14_000_000, "available": True,
                "load_avg_before": [1.0, 1.0, 1.0], "load_avg_after": [2.0, 1.0, 1.0],
                "tools": {"ours": _tool([0.5, 0.4, 0.6], [30_000]),
                          "floor": _tool([0.25], [20_000]),
                          "ovc": _tool([2.0], [100_000]),
                          "tf2onnx": _tool([], [], error="exit 1: boom")},
                "targets": {"<= 0.6 s": True}},
            "caffe_vgg16": {"available": False, "reason": "no corpus"},
        },
    }
    table = run.markdown_table(results)
    row = next(line for line in table.splitlines() if line.startswith("| keras_mobilenetv2"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "14"
    assert cells[2] == "0.50 (0.40-0.60)"
    assert cells[5] == "2.00x"  # ours / floor
    assert cells[7] == "0.25x"  # ours / ovc
    assert cells[8] == "failed" and cells[9] == "-"
    assert cells[10] == "<= 0.6 s ok"
    assert "caffe_vgg16 | - | unavailable: no corpus" in table
    assert "Test CPU (2 cores, 8 GB RAM)" in table
    assert "keras_mobilenetv2 / tf2onnx: exit 1: boom" in table
    assert "keras_mobilenetv2 1.0-2.0" in table
    assert "Start-up" not in table  # no command measurements in these results

    results["commands"] = {"check_100mb": {
        "label": "nhwc-onnx check big.onnx", "bytes": 100 * 2**20,
        "tool": _tool([0.2, 0.3, 0.25], [110 * 1024]),
        "targets": {"<= 0.3 s": True, "RSS <= 1.2x file": True}}}
    row = next(line for line in run.markdown_table(results).splitlines()
               if line.startswith("| `nhwc-onnx check big.onnx`"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:] == ["104.9", "0.25 (0.20-0.30)", "110 (1.10x)",
                         "<= 0.3 s ok, RSS <= 1.2x file ok"]


def test_measure_reads_the_childs_own_peak_rss():
    script = "b = bytearray(80 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])"
    sample = run.measure([sys.executable, "-c", script], timeout=60)
    assert sample.returncode == 0
    assert 80 * 1024 <= sample.rss_kb < 400 * 1024
    failing = run.measure([sys.executable, "-c", "import sys; sys.exit('bad')"], timeout=60)
    assert failing.returncode == 1 and "bad" in failing.stderr_tail


@pytest.mark.parametrize("size,k,s,pad,want", [(112, 3, 2, 0, 56), (224, 2, 2, 0, 112),
                                               (5, 3, 2, 1, 3), (6, 3, 2, 1, 4), (7, 7, 1, 0, 1),
                                               (5, 2, 2, 1, 3)])  # last: window starts in pad
def test_caffe_pool_size_rounds_up(size, k, s, pad, want):
    # the benchmark maker shapes its blobs with the Caffe frontend's own rule
    assert caffe_models.axis_plan(size, k, s, 1, pad, pad, "NOTSET", 1)[0] == want


PROTOTXT = """
name: "tiny"
input: "data"
input_dim: 1 input_dim: 3 input_dim: 11 input_dim: 9
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 } }
layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
layer { name: "sc" type: "Scale" bottom: "conv" top: "conv" scale_param { bias_term: true } }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc"
  inner_product_param { num_output: 5 bias_term: false } }
"""


def test_caffe_blob_shapes_and_written_layers_parse_back():
    from google.protobuf import text_format

    pb = caffe_models._proto_module()
    net = text_format.Parse(PROTOTXT, pb.NetParameter())
    shapes = caffe_models.blob_shapes(net)
    # conv 11x9 -> 6x5, pool (ceil) -> 3x3, so fc sees 4*3*3 = 36 inputs.
    assert [(n, [s for s, _ in b]) for n, _, b in shapes] == [
        ("conv", [(4, 3, 3, 3), (4,)]), ("bn", [(4,), (4,), (1,)]),
        ("sc", [(4,), (4,)]), ("fc", [(5, 36)])]
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
              rng.standard_normal(4).astype(np.float32)]
    parsed = pb.NetParameter.FromString(caffe_models.layer_bytes(pb, "conv", "Convolution",
                                                                 arrays))
    layer = parsed.layer[0]
    assert (layer.name, layer.type, len(layer.blobs)) == ("conv", "Convolution", 2)
    for blob, array in zip(layer.blobs, arrays):
        assert tuple(blob.shape.dim) == array.shape
        np.testing.assert_array_equal(np.array(blob.data, np.float32), array.ravel())


def test_failure_text_names_signal_and_last_lines():
    killed = run.Sample(12.0, 2048 * 1024, -9, "INFO a\nINFO b\n")
    assert run.failure_text(killed).startswith("killed (SIGKILL")
    assert "2048 MB peak RSS" in run.failure_text(killed)
    exited = run.Sample(1.0, 10, 2, "Usage: x\n\nError: No such command 'convert'.\n")
    assert run.failure_text(exited) == "exit 2: Usage: x / Error: No such command 'convert'."


def test_floor_script_round_trips_a_model(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [weight])
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(helper.make_model(graph), str(src))
    sample = run.measure(run.floor_command(src, out, Path(sys.executable).parent), timeout=120)
    assert sample.returncode == 0, sample.stderr_tail
    loaded = onnx.load(str(out))
    np.testing.assert_array_equal(numpy_helper.to_array(loaded.graph.initializer[0]),
                                  np.arange(6, dtype=np.float32).reshape(2, 3))


def test_commands_are_recorded_relative_to_the_checkout():
    root = Path("/repo")
    assert run.relative_to_root("/repo/benchmarks/.cache/m.pb", root) == "benchmarks/.cache/m.pb"
    assert run.relative_to_root("/elsewhere/m.pb", root) == "/elsewhere/m.pb"
    assert run.relative_to_root("--runs", root) == "--runs"


def test_every_tool_writes_into_an_empty_place(tmp_path):
    ours_dir, other_dir = tmp_path / "ours", tmp_path / "ovc"
    for folder in (ours_dir, other_dir):
        folder.mkdir()
        (folder / "model.onnx").write_bytes(b"previous run")
    (ours_dir / "keep.txt").write_text("the folder stays")
    run.clear_output(ours_dir, ours_dir / "model.onnx")
    run.clear_output(other_dir, None)
    assert sorted(p.name for p in ours_dir.iterdir()) == ["keep.txt"]
    assert other_dir.is_dir() and not any(other_dir.iterdir())
    run.clear_output(tmp_path / "fresh", tmp_path / "fresh" / "model.onnx")  # nothing to remove
    assert (tmp_path / "fresh").is_dir()


instructions = _load("instructions")


def test_instruction_count_is_read_from_callgrinds_last_summary_line():
    stderr = ("==71== Callgrind, a call-graph generating cache profiler\n"
              "==71== Events    : Ir\n==71== Collected : 1017457628\n==71== \n"
              "==71== I   refs:      1,017,457,628\n")
    assert instructions.collected(stderr) == 1017457628
    assert instructions.collected("==71== Collected : 5\n==72== Collected : 7\n") == 7
    assert instructions.collected("valgrind: command not found") is None


def test_instruction_counts_run_steady_under_callgrind():
    cmd = instructions.under_callgrind(["nhwc-onnx", "check", "m.onnx"])
    assert cmd[0] == "valgrind" and "--tool=callgrind" in cmd
    assert cmd[-3:] == ["nhwc-onnx", "check", "m.onnx"]
    assert any(a.startswith("--callgrind-out-file=") for a in cmd)  # no callgrind.out.* files
    assert instructions.STEADY_ENV == {"OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


def test_instruction_table_shows_millions_and_the_ratio():
    text = instructions.table({
        "date": "d", "revision": "abc", "ours_pythonpath": "",
        "models": {"m1": {"ours": 1_500_000_000, "floor": 1_000_000_000},
                   "m2": {"ours": None, "floor": 700_000_000}},
        "commands": {"nhwc-onnx --help": 233_000_000}})
    assert "| m1 | 1,500 M | 1,000 M | 1.50x |" in text
    assert "| m2 | - | 700 M | - |" in text
    assert "| `nhwc-onnx --help` | 233 M |" in text
