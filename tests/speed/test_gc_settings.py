"""The command line collects reference cycles less often than Python's default
(nhwc_onnx.cli.GC_YOUNG_ALLOCATIONS), but still collects them; the library leaves the
collector as it finds it; and no weight of a conversion waits in a reference cycle (so
collecting later cannot hold on to replaced weights)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Runs a command, then makes cycles of garbage (each one holding a marker object) without
# ever calling gc.collect(): the collector must reclaim the early ones by itself.
_AFTER_COMMAND = textwrap.dedent("""
    import gc, json, sys, weakref
    from nhwc_onnx import cli
    sys.argv = ["nhwc-onnx", *sys.argv[1:]]
    code = cli.command_line()

    class Marker:
        pass

    first = []
    for i in range(3 * cli.GC_YOUNG_ALLOCATIONS):
        node = {"marker": Marker()}
        node["self"] = node  # a cycle: reference counting alone never frees it
        if i < 10:
            first.append(weakref.ref(node["marker"]))
    print(json.dumps({"code": code, "threshold": gc.get_threshold()[0],
                      "setting": cli.GC_YOUNG_ALLOCATIONS, "enabled": gc.isenabled(),
                      "frozen": gc.get_freeze_count(),
                      "early_cycles_alive": sum(r() is not None for r in first)}))
""")


def _run(script: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_command_collects_cycles_less_often_but_still_collects_them():
    result = _run(_AFTER_COMMAND, "check", str(EXAMPLES / "tiny_convnet.onnx"))
    assert result["code"] == 0
    assert result["threshold"] == result["setting"] > 700  # 700: Python's default
    assert result["enabled"]
    assert result["frozen"] > 1000  # what start-up loaded is no longer walked
    assert result["early_cycles_alive"] == 0


_LIBRARY = textwrap.dedent("""
    import gc, json, sys
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    from nhwc_onnx import api
    api.check([sys.argv[1]])
    api.convert(sys.argv[2], sys.argv[3])
    print(json.dumps({"same_threshold": gc.get_threshold() == threshold,
                      "same_frozen": gc.get_freeze_count() == frozen}))
""")


def test_the_library_leaves_the_collector_alone(tmp_path):
    result = _run(_LIBRARY, str(EXAMPLES / "tiny_convnet.onnx"),
                  str(EXAMPLES / "onnx" / "small_nchw.onnx"), str(tmp_path / "out.onnx"))
    assert result == {"same_threshold": True, "same_frozen": True}


# Converts with the collector off, keeping whatever it would have collected: no weight may be
# in there (a replaced weight must be freed when its last reference goes).
_CYCLES_OF_A_CONVERSION = textwrap.dedent("""
    import gc, json, sys
    from nhwc_onnx import api
    from nhwc_onnx.options import ConvertOptions
    from nhwc_onnx.ir import DeferredArray, Value
    source, weights, out = sys.argv[1:]
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    # Kept alive: the converted model itself is a graph of cycles, freed when dropped.
    result = api.convert(source, out, options=ConvertOptions(weights=weights or None))
    gc.collect()
    held = [type(o).__name__ for o in gc.garbage
            if isinstance(o, DeferredArray) or (isinstance(o, Value) and o.const is not None)]
    print(json.dumps({"held": held}))
""")


@pytest.mark.parametrize("source, weights", [
    ("tf/small_cnn.pb", ""),  # BatchNorm folded into deferred ScaledWeights
    ("caffe/tiny_net.prototxt", "caffe/tiny_net.caffemodel"),
    ("onnx/small_nchw.onnx", ""),
])
def test_no_weight_waits_for_the_cycle_collector(tmp_path, source, weights):
    result = _run(_CYCLES_OF_A_CONVERSION, str(EXAMPLES / source),
                  str(EXAMPLES / weights) if weights else "", str(tmp_path / "out.onnx"))
    assert result == {"held": []}


# A batch converts model after model in one process; with the command line's settings, each
# converted model (a graph of cycles) must still be gone before the next one starts.
_BATCH_OF_THREE = textwrap.dedent("""
    import gc, json, sys
    from nhwc_onnx import cli
    from nhwc_onnx.conversion import several as batch
    from nhwc_onnx.options import ConvertOptions
    from nhwc_onnx.ir import Graph
    source, out_dir = sys.argv[1:]
    cli._collect_garbage_less_often()
    alive = []
    for i in range(3):
        outcome = batch.convert_one(source, f"{out_dir}/m{i}.onnx", ConvertOptions())
        assert outcome.status == "ok", outcome
        alive.append(sum(isinstance(o, Graph) for o in gc.get_objects()))
    print(json.dumps({"graphs_alive_after_each": alive}))
""")


def test_a_batch_frees_each_model_before_the_next(tmp_path):
    result = _run(_BATCH_OF_THREE, str(EXAMPLES / "tf" / "small_cnn.pb"), str(tmp_path))
    assert result == {"graphs_alive_after_each": [0, 0, 0]}


# The exact-cut search converts attempt after attempt in one process: a refused attempt's
# graph must be gone before the next attempt, so the search does not pile graphs up.
_CUT_ATTEMPTS = textwrap.dedent("""
    import gc, json, sys
    from nhwc_onnx import api, cli
    from nhwc_onnx.conversion import cut
    from nhwc_onnx.errors import UnsupportedOpError
    from nhwc_onnx.options import ConvertOptions
    from nhwc_onnx.ir import Graph
    source = sys.argv[1]
    cli._collect_garbage_less_often()
    try:
        api.convert(source, options=ConvertOptions(exact_cut=False))
    except UnsupportedOpError as exc:
        error = exc
    alive = []

    def try_convert(options):
        alive.append(sum(isinstance(o, Graph) for o in gc.get_objects()))
        api.convert(source, options=options.replace(exact_cut=False))

    # Two checks (the command line allows one, cut.MAX_CHECKS): the garbage of a refused check
    # must be gone before the next conversion whenever a search makes one.
    graph = cut.source_graph(source, "onnx", ConvertOptions())
    found = cut.search(graph, ConvertOptions(), [p.node for p in error.problems], try_convert,
                       checks=2)
    print(json.dumps({"outputs": found.outputs, "graphs_alive_at_each_attempt": alive}))
""")


def test_the_exact_cut_search_frees_each_refused_attempt(tmp_path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    # Sin is refused by the frontend; the first cut (q, a squeezed map that as a graph output
    # would need a layout Transpose) by its checking conversion; the second (r) converts: two
    # attempts (the search is given two checks; the command line's is one).
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Squeeze", ["r", "axes"], ["q"], name="q"),
         helper.make_node("Sin", ["q"], ["y"], name="sin")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.array([0], np.int64), "axes")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    source = tmp_path / "model.onnx"
    onnx.save(proto, str(source))
    result = _run(_CUT_ATTEMPTS, str(source))
    first, second = result["graphs_alive_at_each_attempt"]  # exactly two attempts
    assert result["outputs"] == ["r"]
    assert second <= first  # the refused first attempt left nothing behind
