"""Seeded mutation fuzzing of small valid models of each format through ``api.convert``.

Campaigns: "onnx", "tf", "caffe" mutate one small valid model of each format (bytes and
protobuf fields); "onnx_ops" mutates the ONNX backend node tests (built in code by the onnx
package) of every op the ONNX frontend supports, including their constant inputs (shapes,
axes, pads, scales). Each campaign runs in a child process under RLIMIT_AS; the only exceptions
allowed to escape ``convert`` are the project's own (NhwcOnnxError subclasses). Crashes already in
tests/reliability/CRASHES.md (with an xfail regression test in test_crash_regressions.py) are listed
in KNOWN_CRASHES and reported, not failed on; any other crash fails the test with the case
number to replay: ``python tests/reliability/fuzz_harness.py FORMAT --only N``.

NHWC_FUZZ_CASES (default 1200 per format) and NHWC_FUZZ_SEED (default 0) scale the run;
the long campaign is e.g. NHWC_FUZZ_CASES=5000.
"""
from __future__ import annotations

import json
import os
import random
import sys

import pytest
from fuzz_cases import CaseFactory
from fuzz_mutators import mutate_bytes, mutate_message
from rel_limits import HERE, run_limited
from rel_models import onnx_model

CASES = int(os.environ.get("NHWC_FUZZ_CASES", "1200"))
SEED = int(os.environ.get("NHWC_FUZZ_SEED", "0"))

# signature (exception type at file:function) -> CRASHES.md entry
KNOWN_CRASHES: dict[str, int] = {}  # every crash found so far is fixed
FORMATS = ["onnx", "onnx_ops", "tf", "caffe"]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_fuzz_only_project_errors_escape_convert(fmt, tmp_path):
    proc = run_limited([str(HERE / "fuzz_harness.py"), fmt, str(CASES), str(SEED),
                        "--work", str(tmp_path)], timeout=120 + CASES * 0.5)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    summary = {k: result[k] for k in ("cases", "outcomes", "seconds", "max_rss_mb")}
    print(f"\nfuzz {fmt}: {json.dumps(summary)}", file=sys.stderr)
    for crash in result["crashes"]:
        known = KNOWN_CRASHES.get(crash["signature"])
        entry = f"CRASHES.md #{known}" if known else "NEW"
        print(f"  case {crash['case']}: {crash['signature']} ({entry}): {crash['message']}",
              file=sys.stderr)
    assert result["cases"] == CASES
    assert result["outcomes"].get("converted", 0) > CASES // 20, "the mutations broke everything"
    new = [c for c in result["crashes"] if c["signature"] not in KNOWN_CRASHES]
    assert new == [], json.dumps(new, indent=1)


@pytest.mark.parametrize("fmt", ["onnx", "tf", "caffe"])
def test_fuzz_cases_replay_exactly(fmt):
    first, second = CaseFactory(fmt, 3), CaseFactory(fmt, 3)
    for i in (0, 7, 123):
        a, b = first.case(i), second.case(i)
        assert a.files == b.files and a.steps == b.steps
    assert first.case(1).files != first.case(2).files


def test_mutators_change_the_model_in_every_kind_of_way():
    rng = random.Random(1)
    data = onnx_model().SerializeToString()
    changed = sum(mutate_bytes(data, rng)[0] != data for _ in range(200))
    assert changed >= 190
    kinds = set()
    for _ in range(300):
        model = onnx_model()
        before = model.SerializeToString()
        steps = mutate_message(model, rng, ["Conv"], count=1)
        kinds.add(steps[0].split()[0])
        if not steps[0].startswith("skipped"):
            assert model.SerializeToString() != before or steps[0].startswith(("reverse", "set"))
    assert {"set", "delete", "duplicate", "clear"} <= kinds
