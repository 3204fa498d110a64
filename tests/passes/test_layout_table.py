"""Each core op's NCHW -> NHWC layout rule is in the passes' table, once, and its layout class
is the rule's: the schemas hold no rule and no class of their own for a core op."""
from __future__ import annotations

import subprocess
import sys

import pytest

from nhwc_onnx.passes.layout import moves, rules
from nhwc_onnx.passes.layout.images import is_spatial
from nhwc_onnx.passes.layout.table import LAYOUT_RULES, layout_class
from nhwc_onnx.passes.layout.walk import LayoutRule
from nhwc_onnx.schemas import CORE_OPS, DIALECT_OPS, LayoutClass


def test_every_core_op_has_a_layout_rule_and_nothing_else_has_one():
    assert sorted(LAYOUT_RULES) == CORE_OPS.names()
    assert len(LAYOUT_RULES) == 79
    assert all(isinstance(rule, LayoutRule) for rule in LAYOUT_RULES.values())


def test_core_schemas_carry_no_pass_logic_and_no_layout_class():
    for schema in CORE_OPS.all():
        assert not hasattr(schema, "layout_rule"), schema.name
        assert schema.layout is None, schema.name
    # A dialect op has no layout rule (it is NHWC already): it declares its class.
    assert all(isinstance(s.layout, LayoutClass) for s in DIALECT_OPS.all())


@pytest.mark.parametrize("op, expected", [
    ("Relu", LayoutClass.TRANSPARENT), ("Add", LayoutClass.TRANSPARENT),
    ("Cast", LayoutClass.TRANSPARENT), ("Conv", LayoutClass.IMPLICIT),
    ("GlobalAveragePool", LayoutClass.IMPLICIT), ("Concat", LayoutClass.ATTRIBUTE),
    ("Transpose", LayoutClass.ATTRIBUTE), ("Resize", LayoutClass.ATTRIBUTE),
    # The eight the schemas used to call transparent although their rule is not:
    ("Expand", LayoutClass.ATTRIBUTE), ("Tile", LayoutClass.ATTRIBUTE),
    ("MatMul", LayoutClass.TERMINATE), ("Gemm", LayoutClass.TERMINATE),
    ("ConstantOfShape", LayoutClass.TERMINATE), ("Range", LayoutClass.TERMINATE),
    ("Shape", LayoutClass.TERMINATE), ("Size", LayoutClass.TERMINATE),
    ("Reshape", LayoutClass.TERMINATE), ("Flatten", LayoutClass.TERMINATE),
])
def test_the_layout_class_is_the_rules(op, expected):
    assert layout_class(op) is expected
    assert LAYOUT_RULES[op].layout_class is expected


def test_elementwise_ops_are_exactly_those_declared_elementwise():
    declared = {s.name for s in CORE_OPS.all() if s.elementwise}
    assert {op for op, r in LAYOUT_RULES.items() if r is rules.elementwise} == declared
    assert {op for op, r in LAYOUT_RULES.items()
            if r.layout_class is LayoutClass.TRANSPARENT} == declared
    assert len(declared) == 43 and {"Relu", "Cast", "Where", "PRelu"} <= declared


def test_spatial_ops_are_exactly_those_with_a_data_format():
    spatial = {op for op, r in LAYOUT_RULES.items() if r is rules.spatial}
    assert spatial == {op for op in CORE_OPS.names() if is_spatial(op)}
    assert spatial == {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
                       "GlobalMaxPool", "DepthToSpace", "SpaceToDepth"}


def test_rules_that_run_without_a_permuted_input():
    always = {op for op, r in LAYOUT_RULES.items() if r.always_runs}
    spatial = {op for op in CORE_OPS.names() if is_spatial(op)}
    assert always == spatial | {"Transpose", "Reshape", "Unsqueeze"}
    assert LAYOUT_RULES["Reshape"] is moves.reshape_always and not moves.reshape.always_runs


def test_the_schemas_do_not_import_the_passes():
    """Declaring the core ops (frontends, check) loads no pass module."""
    code = ("import sys\n"
            "from nhwc_onnx.schemas import CORE_OPS\n"
            "CORE_OPS.all()\n"
            "print(sorted(m for m in sys.modules if m.startswith('nhwc_onnx.passes')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
