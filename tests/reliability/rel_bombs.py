"""Small files that expand exponentially and big-but-legal nets,
built in code. Run as a script to write one: ``python rel_bombs.py tf|onnx|relu N PATH``."""
from __future__ import annotations

import sys

from onnx import TensorProto, helper

from nhwc_onnx.frontends.tensorflow.proto import tf_graph_pb2 as pb


def tf_function_bomb(levels: int = 20) -> bytes:
    """A GraphDef whose library function ``level<k>`` calls ``level<k-1>`` twice (in a
    chain), down to ``level0`` = Relu: one call of the top expands to 2^levels Relu nodes."""
    graph = pb.GraphDef()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = pb.DT_FLOAT
    for d in (1, 4):
        x.attr["shape"].shape.dim.add(size=d)
    leaf = graph.library.function.add()
    leaf.signature.name = "level0"
    leaf.signature.input_arg.add(name="a", type=pb.DT_FLOAT)
    leaf.signature.output_arg.add(name="b", type=pb.DT_FLOAT)
    relu = leaf.node_def.add(name="relu", op="Relu", input=["a"])
    relu.attr["T"].type = pb.DT_FLOAT
    leaf.ret["b"] = "relu:activations:0"
    for k in range(1, levels + 1):
        fn = graph.library.function.add()
        fn.signature.name = f"level{k}"
        fn.signature.input_arg.add(name="a", type=pb.DT_FLOAT)
        fn.signature.output_arg.add(name="b", type=pb.DT_FLOAT)
        first = fn.node_def.add(name="first", op="PartitionedCall", input=["a"])
        first.attr["f"].func.name = f"level{k - 1}"
        second = fn.node_def.add(name="second", op="PartitionedCall",
                                 input=["first:output:0"])
        second.attr["f"].func.name = f"level{k - 1}"
        fn.ret["b"] = "second:output:0"
    call = graph.node.add(name="model", op="StatefulPartitionedCall", input=["x"])
    call.attr["f"].func.name = f"level{levels}"
    graph.node.add(name="out", op="Identity", input=["model"]).attr["T"].type = pb.DT_FLOAT
    return graph.SerializeToString()


def onnx_function_bomb(levels: int = 20) -> bytes:
    """An ONNX model whose local function ``level<k>`` (domain ``bomb``) calls ``level<k-1>``
    twice, down to ``level0`` = Relu."""
    functions = [helper.make_function("bomb", "level0", ["a"], ["b"],
                                      [helper.make_node("Relu", ["a"], ["b"])],
                                      [helper.make_opsetid("", 17)])]
    for k in range(1, levels + 1):
        nodes = [helper.make_node(f"level{k - 1}", ["a"], ["t"], domain="bomb"),
                 helper.make_node(f"level{k - 1}", ["t"], ["b"], domain="bomb")]
        functions.append(helper.make_function(
            "bomb", f"level{k}", ["a"], ["b"], nodes,
            [helper.make_opsetid("", 17), helper.make_opsetid("bomb", 1)]))
    graph = helper.make_graph(
        [helper.make_node(f"level{levels}", ["x"], ["y"], domain="bomb", name="model")], "bomb",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, functions=functions,
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid("bomb", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def inplace_relu_prototxt(layers: int) -> str:
    """Input -> Convolution -> ``layers`` in-place ReLU layers (all on blob 'conv')."""
    head = ('name: "deep"\n'
            'layer { name: "data" type: "Input" top: "data"\n'
            '  input_param { shape { dim: 1 dim: 3 dim: 5 dim: 7 } } }\n'
            'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"\n'
            '  convolution_param { num_output: 2 kernel_size: 1 } }\n')
    relu = 'layer {{ name: "r{}" type: "ReLU" bottom: "conv" top: "conv" }}\n'
    return head + "".join(relu.format(i) for i in range(layers))


if __name__ == "__main__":
    kind, count, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if kind == "relu":
        with open(path, "w") as f:
            f.write(inplace_relu_prototxt(count))
    else:
        data = tf_function_bomb(count) if kind == "tf" else onnx_function_bomb(count)
        with open(path, "wb") as f:
            f.write(data)
