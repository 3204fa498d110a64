"""Every core op is declared once, with all its rules, by importing the schemas alone."""
from __future__ import annotations

import subprocess
import sys

import pytest

from nhwc_onnx.ir import Node, Value
from nhwc_onnx.schemas import CORE_OPS
from nhwc_onnx.schemas.core import attr
from nhwc_onnx.schemas.core.define import core_op, dtype_of_inputs, same_shape

RULES = ("infer", "infer_dtype", "evaluate", "lower")  # layout: tests/passes/test_layout_table.py


@pytest.mark.parametrize("rule", RULES)
def test_every_core_op_declares_its_rule(rule):
    missing = [s.name for s in CORE_OPS.all() if getattr(s, rule) is None]
    assert missing == []
    assert len(CORE_OPS.names()) == 79


def test_schemas_are_complete_without_importing_passes():
    """No rule is attached as a side effect of importing ``nhwc_onnx.passes``."""
    code = (
        "import sys\n"
        "from nhwc_onnx.schemas import CORE_OPS\n"
        f"rules = {RULES!r}\n"
        "assert 'nhwc_onnx.passes' not in sys.modules, 'schemas import the passes'\n"
        "bad = [(s.name, r) for s in CORE_OPS.all() for r in rules if getattr(s, r) is None]\n"
        "print(len(CORE_OPS.names()), bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["79", "[]"]


def test_an_op_without_a_rule_cannot_be_declared():
    before = CORE_OPS.names()
    with pytest.raises(TypeError):
        core_op("NoRules", "declared without an evaluator", ["X"], infer=same_shape,
                dtype=dtype_of_inputs)  # evaluate= missing
    assert CORE_OPS.names() == before


def test_attr_reads_the_node_or_the_schema_default():
    conv = Node("Conv", [Value("x"), Value("w")], [Value("y")], {"kernel_shape": [3, 3]})
    assert attr(conv, "weight_layout") == "OIHW"
    assert attr(conv, "strides") == [1, 1]
    conv.attrs["weight_layout"] = "HWIO"
    assert attr(conv, "weight_layout") == "HWIO"
    with pytest.raises(KeyError):
        attr(conv, "weight_layuot")  # a misspelt name is a bug, not a silent default
