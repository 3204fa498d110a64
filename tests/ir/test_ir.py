import numpy as np
import pytest

from nhwc_onnx.errors import InvalidModelError
from nhwc_onnx.ir import Graph, Node, Value


def _chain():
    g = Graph()
    x = g.add_input(Value("x", shape=(1, 4)))
    a = g.make_node("Relu", [x], name="a")
    b = g.make_node("Abs", [a.output], name="b")
    c = g.make_node("Add", [a.output, b.output], name="c")
    g.outputs = [c.output]
    return g, x, a, b, c


def test_producer_and_uses_track_edges():
    _, x, a, b, c = _chain()
    assert a.output.producer() is a
    assert x.producer() is None
    assert sorted((n.name, i) for n, i in a.output.uses()) == [("b", 0), ("c", 0)]
    assert a.output.consumers() == [b, c]


def test_set_input_keeps_use_lists_right():
    _, x, _, b, c = _chain()
    c.set_input(1, x)
    assert (c, 1) in x.uses()
    assert b.output.uses() == []


def test_replace_all_uses_includes_graph_outputs():
    g, x, a, b, c = _chain()
    g.replace_all_uses(c.output, b.output)
    assert g.outputs == [b.output]
    g.replace_all_uses(a.output, x)
    assert a.output.uses() == []
    assert b.inputs == (x,)


def test_remove_while_iterating_is_safe():
    g, _, a, b, _ = _chain()
    seen = []
    for node in g.nodes:
        seen.append(node.name)
        if node is a:
            g.remove_node(b)
    assert seen == ["a", "b", "c"]  # the snapshot still lists b
    assert [n.name for n in g.nodes] == ["a", "c"]
    assert b.graph is None and (b, 0) not in a.output.uses()


def test_toposort_orders_and_is_deterministic():
    g = Graph()
    x = g.add_input(Value("x", shape=(2,)))
    late = g.make_node("Abs", [x], name="late")
    # Added after its consumer's producer chain: toposort must move producers first.
    first = g.make_node("Relu", [x], name="first")
    user = g.make_node("Add", [first.output, late.output], name="user")
    g.remove_node(late)
    g2 = g.make_node("Abs", [x], name="late2")
    user.set_input(1, g2.output)
    g.toposort()
    names = [n.name for n in g.nodes]
    assert names.index("late2") < names.index("user")
    assert names.index("first") < names.index("user")
    assert names == ["first", "late2", "user"]


def test_toposort_names_cycle():
    g = Graph()
    x = g.add_input(Value("x", shape=(2,)))
    a = g.make_node("Add", [x, x], name="a")
    b = g.make_node("Relu", [a.output], name="b")
    a.set_input(1, b.output)
    with pytest.raises(InvalidModelError, match="cycle through node\\(s\\) 'a', 'b'"):
        g.toposort()


def test_unique_names():
    g = Graph()
    names = {g.make_node("Relu", [], name="conv").name for _ in range(3)}
    assert names == {"conv", "conv_1", "conv_2"}


def test_value_cannot_have_two_producers():
    v = Value("v")
    Node("Relu", [], [v], name="p1")
    with pytest.raises(InvalidModelError, match="produced by both"):
        Node("Relu", [], [v], name="p2")


def test_constants_listed_once_in_first_use_order():
    g = Graph()
    x = g.add_input(Value("x", shape=(3,)))
    w1 = g.constant(np.ones(3, np.float32), "w")
    w2 = g.constant(np.zeros(3, np.float32), "w")
    n1 = g.make_node("Add", [x, w2])
    n2 = g.make_node("Mul", [n1.output, w1])
    g.make_node("Sub", [n2.output, w2])
    assert [v.name for v in g.constants()] == ["w_1", "w"]
    assert w1.shape == (3,) and w1.dtype == "float32"


def test_bypass_keeps_graph_output_name():
    g = Graph()
    x = g.add_input(Value("x", shape=(2,)))
    r = g.make_node("Relu", [x], name="relu")
    ident = g.make_node("Identity", [r.output], name="out", outputs=["out"])
    g.outputs = [ident.output]
    g.bypass(ident)
    assert len(g) == 1
    assert g.outputs[0].name == "out"
    assert g.outputs[0].producer() is r


def test_dangling_inputs_found():
    g = Graph()
    ghost = Value("ghost", shape=(2,))
    n = g.make_node("Relu", [ghost], name="r")
    g.outputs = [n.output]
    assert [(node.name, idx, v.name) for node, idx, v in g.dangling_inputs()] == [("r", 0, "ghost")]


def test_node_outputs_cannot_be_changed_from_outside_the_ir():
    _, _, a, _, _ = _chain()
    assert isinstance(a.outputs, tuple)
    with pytest.raises(AttributeError):
        a.outputs = [Value("other")]
    with pytest.raises(TypeError):
        a.outputs[0] = Value("other")  # type: ignore[index]


def test_move_output_keeps_the_tensor_its_uses_and_its_graph_output_role():
    g, _, _, _, c = _chain()
    y = c.output
    fresh = Value("c_inner")
    assert g.move_output(fresh, c) is y  # c now writes an inner tensor ...
    assert c.outputs == (fresh,) and fresh.producer() is c and y.producer() is None
    after = g.make_node("Neg", [fresh], name="after", outputs=[y])  # ... that Neg reads
    assert y.producer() is after and g.outputs == [y]
    g.toposort()
    assert [n.name for n in g.nodes] == ["a", "b", "c", "after"]


def test_move_output_refuses_a_tensor_another_live_node_produces():
    g, _, a, b, _ = _chain()
    with pytest.raises(ValueError, match="still produced by 'b'"):
        g.move_output(b.output, a)
    g.remove_node(b)  # once its producer is gone the tensor can move
    g.move_output(b.output, a)
    assert b.output.producer() is a


def test_rename_value_frees_the_old_name_and_release_name_a_reserved_one():
    g = Graph()
    g.reserve_name("w")
    v = g.constant(np.zeros(2, np.float32), "w")
    assert v.name == "w_1"
    g.release_name("w")
    assert g.rename_value(v, "w") == "w"
    assert g.unique_name("w_1") == "w_1"  # the old name is free again


def test_toposort_keeps_an_ordered_graph_and_still_finds_a_self_loop():
    g, _, a, b, c = _chain()
    g.toposort()
    assert g.nodes == [a, b, c]
    # A removed producer does not order anything; the rest stays as it is.
    g.remove_node(a)
    g.toposort()
    assert g.nodes == [b, c]
    # A node reading its own output is a cycle even though nothing is out of order.
    loop = g.make_node("Add", [b.output, b.output], name="loop")
    loop.set_input(1, loop.output)
    with pytest.raises(InvalidModelError, match="cycle through node\\(s\\) 'loop'"):
        g.toposort()


def test_value_dtype_names_are_numpy_names_whatever_the_spelling():
    assert Value("a", dtype="f4").dtype == "float32"
    assert Value("b", dtype=np.float64).dtype == "float64"
    assert Value("c", dtype="float32").dtype == "float32"
    assert Value("d", dtype=">f4").dtype == ">f4"  # a declared byte order is kept
    # A constant's type is its element type, whatever its storage order.
    assert Value("e", const=np.zeros(2, dtype=">f4")).dtype == "float32"
    assert Value("f", const=np.zeros(2, dtype="<i8")).dtype == "int64"
    assert Value("g", dtype=">f4").dtype == ">f4"  # asked again (remembered): the same name
