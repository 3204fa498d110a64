"""IR -> ONNX -> IR -> ONNX: same bytes, checker-clean files, flags, metadata, attribute kinds."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import AttributeProto

from nhwc_onnx import __version__
from nhwc_onnx.errors import InvalidAttributeError
from nhwc_onnx.ir import NHWC, Graph, Model, Value
from nhwc_onnx.runtime import run
from nhwc_onnx.schemas import validate
from nhwc_onnx.serialize import IR_VERSION, from_onnx, to_bytes, to_onnx


def _reparse(data: bytes) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    proto.ParseFromString(data)
    return proto


def _attr(proto: onnx.ModelProto, node: str, name: str) -> AttributeProto:
    n = next(n for n in proto.graph.node if n.name == node)
    return next(a for a in n.attribute if a.name == name)


def test_fixture_model_is_valid_dialect(rich_model):
    assert validate(rich_model) == []


@pytest.mark.parametrize("domain", ["nhwc", ""])
@pytest.mark.parametrize("as_constants", [False, True])
def test_round_trip_is_byte_identical(domain, as_constants, build_model):
    first = to_bytes(build_model(), domain=domain, weights_as_constants=as_constants)
    model = from_onnx(_reparse(first))
    second = to_bytes(model, domain=domain, weights_as_constants=as_constants)
    assert first == second
    # and once more through the reader, to be sure nothing drifts
    assert to_bytes(from_onnx(_reparse(second)), domain=domain,
                    weights_as_constants=as_constants) == first


def test_round_trip_keeps_the_ir(rich_model):
    back = from_onnx(_reparse(to_bytes(rich_model)))
    g0, g1 = rich_model.graph, back.graph
    assert [n.name for n in g0.nodes] == [n.name for n in g1.nodes]
    assert [n.op for n in g0.nodes] == [n.op for n in g1.nodes]
    assert all(n.domain == "nhwc" for n in g1.nodes)
    for a, b in zip(g0.nodes, g1.nodes):
        assert [v.name for v in a.inputs] == [v.name for v in b.inputs]
        assert set(a.attrs) == set(b.attrs)
        for key in a.attrs:
            assert b.attrs[key] == a.attrs[key]
    consts0 = {v.name: v.const for v in g0.constants()}
    consts1 = {v.name: v.const for v in g1.constants()}
    assert consts0.keys() == consts1.keys()
    for name, arr in consts0.items():
        assert consts1[name].dtype == arr.dtype
        np.testing.assert_array_equal(consts1[name], arr)
        assert consts1[name].flags.writeable
    inp = g1.inputs[0]
    assert (inp.name, inp.dtype, inp.shape, inp.layout) == ("input:0", "float32", (2, 7, 5, 3),
                                                            NHWC)
    assert [v.name for v in g1.outputs] == [v.name for v in g0.outputs]
    assert g1.outputs[0].shape == (2, 6)  # inferred shapes are written for graph outputs
    assert validate(back) == []


def test_written_file_passes_the_full_onnx_checker(rich_model, tmp_path):
    for as_constants in (False, True):
        proto = to_onnx(rich_model, weights_as_constants=as_constants)
        onnx.checker.check_model(proto, full_check=True)
        assert proto.ir_version == IR_VERSION == 8
        assert {(o.domain, o.version) for o in proto.opset_import} == {("", 17), ("nhwc", 1)}


def test_read_back_model_computes_the_same_numbers(rich_model):
    x = np.random.default_rng(0).standard_normal((2, 7, 5, 3)).astype(np.float32)
    expected = run(rich_model, {"input:0": x})
    got = run(from_onnx(_reparse(to_bytes(rich_model))), {"input:0": x})
    assert expected.keys() == got.keys()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


def test_default_domain_flag_puts_every_dialect_node_in_the_default_domain(rich_model, build_model):
    proto = to_onnx(rich_model, domain="")
    assert {n.domain for n in proto.graph.node} == {""}
    assert [(o.domain, o.version) for o in proto.opset_import] == [("", 17)]
    back = from_onnx(proto)
    assert {n.domain for n in back.graph.nodes} == {""}  # domains are kept as read
    assert validate(back) == []
    # the default-domain IR written with the dialect domain again gives the default file
    assert to_bytes(back, domain="nhwc") == to_bytes(build_model())


def test_weights_as_constants_emits_constant_nodes_and_reads_them_back(rich_model, build_model):
    proto = to_onnx(rich_model, weights_as_constants=True)
    assert len(proto.graph.initializer) == 0
    consts = [n for n in proto.graph.node if n.op_type == "Constant"]
    names = {v.name for v in rich_model.graph.constants()}
    assert {n.output[0] for n in consts} == names
    assert all(n.domain == "nhwc" for n in consts)
    # Constant nodes come first, so the node list stays topologically sorted
    assert [n.op_type for n in proto.graph.node[: len(consts)]] == ["Constant"] * len(consts)
    back = from_onnx(proto)
    assert not any(n.op == "Constant" for n in back.graph.nodes)
    assert {v.name for v in back.graph.constants()} == names
    assert to_bytes(back) == to_bytes(build_model())


def test_initializers_hold_raw_little_endian_bytes(rich_model):
    proto = to_onnx(rich_model)
    init = {t.name: t for t in proto.graph.initializer}
    w = next(v.const for v in rich_model.graph.constants() if v.name == "conv/W")
    assert init["conv/W"].raw_data == w.astype("<f4").tobytes()
    assert list(init["conv/W"].dims) == [4, 3, 3, 3]
    assert init["reshape/shape"].data_type == onnx.TensorProto.INT64


def test_metadata_is_sorted_and_records_converter_version(rich_model):
    proto = to_onnx(rich_model)
    keys = [p.key for p in proto.metadata_props]
    assert keys == sorted(keys)
    meta = {p.key: p.value for p in proto.metadata_props}
    assert meta["converter_version"] == __version__
    assert meta["source"] == "unit test" and meta["options"] == "--seed 7"
    assert json.loads(meta["io_permutations"]) == {"input:0": [0, 2, 3, 1]}
    assert proto.producer_name == "nhwc-onnx" and proto.producer_version == __version__
    assert proto.doc_string == "serializer test model"
    back = from_onnx(proto)
    assert back.io_permutations == {"input:0": [0, 2, 3, 1]}
    assert back.metadata["source"] == "unit test"
    assert "io_permutations" not in back.metadata


def test_attribute_kinds_follow_the_schema(rich_model):
    proto = to_onnx(rich_model)
    elu_alpha = _attr(proto, "elu", "alpha")
    assert elu_alpha.type == AttributeProto.FLOAT and elu_alpha.f == 1.0
    assert _attr(proto, "scale", "scale").type == AttributeProto.FLOAT
    assert _attr(proto, "conv", "pads").type == AttributeProto.STRING
    assert _attr(proto, "conv", "pads").s == b"SAME"
    assert _attr(proto, "pad", "pads").type == AttributeProto.INTS
    assert _attr(proto, "pad", "value").type == AttributeProto.FLOAT
    assert _attr(proto, "softmax", "axis").type == AttributeProto.INT
    back = from_onnx(proto)
    assert back.graph.find_node("elu").attrs["alpha"] == 1.0
    assert isinstance(back.graph.find_node("elu").attrs["alpha"], float)


def _custom_model(attrs: dict) -> Model:
    g = Graph("custom")
    x = g.add_input(Value("x", "float32", (3, 2)))
    node = g.make_node("Mystery", [x], attrs, name="mystery", domain="my.domain")
    g.outputs.append(node.output)
    node.output.shape = (3, 2)
    return Model(g)


def test_ops_without_schema_take_attribute_kinds_from_python_types():
    tensor = np.arange(6, dtype=np.float32).reshape(2, 3)
    attrs = {"i": 3, "f": 0.5, "s": "text", "ints": [1, 2], "floats": [0.5, 2],
             "strings": ["a", "b"], "t": tensor, "npint": np.int64(4), "empty": []}
    proto = to_onnx(_custom_model(attrs))
    onnx.checker.check_model(proto, full_check=True)
    kinds = {a.name: a.type for a in proto.graph.node[0].attribute}
    A = AttributeProto
    assert kinds == {"i": A.INT, "f": A.FLOAT, "s": A.STRING, "ints": A.INTS,
                     "floats": A.FLOATS, "strings": A.STRINGS, "t": A.TENSOR, "npint": A.INT,
                     "empty": A.INTS}
    assert ("my.domain", 1) in {(o.domain, o.version) for o in proto.opset_import}
    back = from_onnx(proto).graph.find_node("mystery")
    assert back.domain == "my.domain"
    assert back.attrs["floats"] == [0.5, 2.0] and back.attrs["strings"] == ["a", "b"]
    np.testing.assert_array_equal(back.attrs["t"], tensor)
    assert to_bytes(from_onnx(proto)) == proto.SerializeToString(deterministic=True)


def test_unstorable_attribute_value_raises_a_clear_error(build_model):
    with pytest.raises(InvalidAttributeError, match="cannot store attribute value"):
        to_onnx(_custom_model({"bad": {"a": 1}}))


def test_values_of_the_wrong_kind_are_written_as_they_are_for_check_to_report(build_model):
    model = build_model()
    model.graph.find_node("softmax").attrs["axis"] = "one"  # the schema says INT
    model.graph.find_node("conv").attrs["pads"] = [1, 1, 1, 1]  # the schema says STRING
    proto = to_onnx(model)
    assert _attr(proto, "softmax", "axis").type == AttributeProto.STRING
    assert _attr(proto, "conv", "pads").type == AttributeProto.INTS
    back = from_onnx(proto)
    rules = {(i.node, i.rule) for i in validate(back)}
    assert {("softmax", "attribute"), ("conv", "attribute")} <= rules
    assert to_bytes(back) == proto.SerializeToString(deterministic=True)


def test_nodes_are_written_in_topological_order():
    g = Graph("order")
    x = g.add_input(Value("x", "float32", (2, 3, 5, 4), NHWC))
    a = g.make_node("Relu", [x], name="a", domain="nhwc")
    b = g.make_node("Sigmoid", [a.output], name="b", domain="nhwc")
    g.outputs.append(b.output)
    proto = to_onnx(Model(g))
    # the file lists the consumer first: the reader must cope, the writer must sort
    proto.graph.node.reverse()
    assert [n.name for n in proto.graph.node] == ["b", "a"]
    back = from_onnx(proto)
    assert [n.name for n in to_onnx(back).graph.node] == ["a", "b"]
