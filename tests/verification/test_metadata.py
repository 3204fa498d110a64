"""The metadata a converted file carries (io_permutations, source_names, preprocessing) is read
by one reader that checks its shape: a malformed value is an unreadable input naming its key
(exit 2 in verify, info, check), and no value of a file reaches the report page unescaped."""
from __future__ import annotations

import json

import onnx
import pytest

from nhwc_onnx.serialize.keys import (
    read_io_permutations,
    read_preprocessing,
    read_source_names,
)
from nhwc_onnx.verification import VerificationReport
from nhwc_onnx.verification.html import render_html
from tests.verification.test_report_page import Page, _no_outside_resources
from tests.verification.verify_models import onnx_net

EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """onnx_net converted with a rename (source_names) and a mean/std (preprocessing)."""
    from tests.cli_runner import run_cli

    folder = tmp_path_factory.mktemp("metadata")
    src = onnx_net(folder / "net.onnx")
    out = folder / "net.nhwc.onnx"
    result = run_cli("convert", src, "-o", out, "--rename", "y=scores", "--mean", "0.5",
                     "--std", "2")
    assert result.exit_code == 0, result.output
    meta = {p.key: p.value for p in onnx.load(out).metadata_props}
    assert {"io_permutations", "source_names", "preprocessing"} <= set(meta)
    return src, out


def _with_metadata(out, path, key: str, value: str):
    model = onnx.load(out)
    entry = next(p for p in model.metadata_props if p.key == key)
    entry.value = value
    onnx.save(model, path)
    return path


MALFORMED = [
    ("io_permutations", "{not json"),
    ("io_permutations", json.dumps({"x": [EVIL]})),
    ("io_permutations", json.dumps({"x": [0, 0, 1, 2]})),  # not a permutation
    ("io_permutations", json.dumps({"x": [0, 2, 1]})),  # rank 3 for a rank-4 input
    ("io_permutations", json.dumps([0, 2, 3, 1])),
    ("io_permutations", json.dumps({"x": [0, 2.0, 3, 1]})),
    ("source_names", "[1, 2"),
    ("source_names", json.dumps({"scores": 7})),
    ("source_names", json.dumps(["y"])),
    ("preprocessing", "nope"),
    ("preprocessing", json.dumps({"x": {"mean": EVIL, "std": [2.0]}})),
    ("preprocessing", json.dumps({"x": {"mean": [0.5], "std": [0.0]}})),
    ("preprocessing", json.dumps({"x": {"mean": [1.0, 2.0], "std": [2.0]}})),  # 3 channels
    ("preprocessing", json.dumps({"nothere": {"mean": [0.5], "std": [2.0]}})),
    ("preprocessing", json.dumps({"x": {"mean": [0.5], "std": [2.0],
                                        "reverse_channels": "yes"}})),
    ("preprocessing", json.dumps("x")),
]


@pytest.mark.parametrize("key,value", MALFORMED)
def test_malformed_metadata_is_an_unreadable_input_naming_its_key(run_cli, converted, tmp_path,
                                                                   key, value):
    src, out = converted
    bad = _with_metadata(out, tmp_path / "bad.onnx", key, value)
    html = tmp_path / "page.html"
    for args in (("verify", src, bad, "--html", html), ("info", bad), ("check", bad)):
        result = run_cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert f"metadata '{key}' is malformed" in result.stderr, result.stderr
        assert "Traceback" not in result.output and "internal error" not in result.stderr
    assert not html.exists()


def test_well_formed_metadata_is_read_back(converted, tmp_path):
    import nhwc_onnx

    src, out = converted
    report = nhwc_onnx.verify(src, out, samples=2)
    assert report.ok and [c.name for c in report.outputs] == ["scores", "y2"]
    assert read_io_permutations('{"x":[0,2,3,1]}') == {"x": [0, 2, 3, 1]}
    assert read_source_names('{"scores":"y"}') == {"scores": "y"}
    assert read_preprocessing('{"x":{"mean":[1],"std":[2]}}') == {
        "x": {"mean": [1.0], "std": [2.0], "reverse_channels": False}}
    assert read_preprocessing('[{"scale": 0.5}]') == {}  # 0.1.0: Caffe's transform_param
    assert read_io_permutations(None) == read_source_names("") == {}


def test_every_value_from_a_model_reaches_the_page_escaped():
    """The page's conversion table shows the recorded layout and op counts of the file."""
    report = VerificationReport(EVIL, EVIL, 1e-4, 1e-4, 0)
    report.summary = {"dialect_ops": {EVIL: EVIL}, "source_ops": {EVIL: 1},
                      "layout": {EVIL: [EVIL, 0]}}
    text = render_html(report)
    page = Page(text)
    _no_outside_resources(page)
    assert EVIL not in text and EVIL in page.body
