"""TensorFlow idioms rewritten at the TF-node level before conversion.

Atrous convolution: TensorFlow (and Keras Conv2D with dilation_rate) may emit
SpaceToBatchND -> Conv2D/DepthwiseConv2dNative (VALID, stride 1) -> BatchToSpaceND. That is
exactly: zero Pad by the SpaceToBatch paddings -> the convolution dilated by the block shape
(VALID) -> a crop by the BatchToSpace crops. Every sub-grid of the padded input is convolved
by the same kernel, and BatchToSpace interleaves the sub-grid outputs back in place.
"""
from __future__ import annotations

import numpy as np

from .proto import tf_graph_pb2
from .tfnodes import TFNode

_CONVS = ("Conv2D", "DepthwiseConv2dNative")


def _const_value(by_name: dict[str, TFNode], name: str) -> np.ndarray | None:
    node = by_name.get(name)
    while node is not None and node.op == "Identity" and node.inputs:
        node = by_name.get(node.inputs[0][0])
    if node is None or node.op != "Const":
        return None
    return node.attrs.tensor("value")


def _const_node(name: str, array: np.ndarray) -> TFNode:
    proto = tf_graph_pb2.NodeDef(name=name, op="Const")
    array = np.ascontiguousarray(array, dtype=np.int32)
    proto.attr["dtype"].type = tf_graph_pb2.DT_INT32
    tensor = proto.attr["value"].tensor
    tensor.dtype = tf_graph_pb2.DT_INT32
    for d in array.shape:
        tensor.tensor_shape.dim.add(size=d)
    tensor.tensor_content = array.tobytes()
    return TFNode.from_proto(proto)


def _node(name: str, op: str, inputs: list, **ints) -> TFNode:
    proto = tf_graph_pb2.NodeDef(name=name, op=op)
    for key, value in ints.items():
        proto.attr[key].i = value
    node = TFNode.from_proto(proto)
    node.inputs = inputs
    return node


def _ints_attr(values: list[int]) -> tf_graph_pb2.AttrValue:
    attr = tf_graph_pb2.AttrValue()
    attr.list.i.extend(values)
    return attr


def _is_plain_conv(conv: TFNode) -> bool:
    fmt = conv.attrs.str("data_format", "NHWC") or "NHWC"
    return (fmt == "NHWC" and conv.attrs.str("padding", "") == "VALID"
            and list(conv.attrs.ints("strides", [1, 1, 1, 1])) == [1, 1, 1, 1]
            and list(conv.attrs.ints("dilations", [1, 1, 1, 1]) or [1, 1, 1, 1]) == [1, 1, 1, 1])


def fuse_atrous(nodes: list[TFNode]) -> list[TFNode]:
    """Rewrite SpaceToBatchND -> conv -> BatchToSpaceND chains; returns the new node list."""
    if not any(n.op == "BatchToSpaceND" for n in nodes):
        return nodes
    by_name = {n.name: n for n in nodes}
    uses: dict[str, int] = {}
    for n in nodes:
        for ref in n.inputs:
            uses[ref[0]] = uses.get(ref[0], 0) + 1
    replaced: dict[str, TFNode] = {}
    added: list[TFNode] = []
    for b2s in nodes:
        if b2s.op != "BatchToSpaceND" or len(b2s.inputs) != 3:
            continue
        conv = by_name.get(b2s.inputs[0][0])
        if conv is None or conv.op not in _CONVS or b2s.inputs[0][1] != 0:
            continue
        s2b = by_name.get(conv.inputs[0][0]) if conv.inputs else None
        if s2b is None or s2b.op != "SpaceToBatchND" or len(s2b.inputs) != 3:
            continue
        if uses.get(s2b.name) != 1 or uses.get(conv.name) != 1 or not _is_plain_conv(conv):
            continue
        block = _const_value(by_name, s2b.inputs[1][0])
        block_after = _const_value(by_name, b2s.inputs[1][0])
        pads = _const_value(by_name, s2b.inputs[2][0])
        crops = _const_value(by_name, b2s.inputs[2][0])
        if block is None or block_after is None or pads is None or crops is None:
            continue
        if block.shape != (2,) or not np.array_equal(block, block_after) or pads.shape != (2, 2) \
                or crops.shape != (2, 2) or (block < 1).any() or (pads < 0).any() \
                or (crops < 0).any():
            continue
        bh, bw = (int(b) for b in block)
        paddings = np.zeros((4, 2), np.int32)
        paddings[1:3] = pads
        pad_const = _const_node(f"{s2b.name}/paddings_4d", paddings)
        replaced[s2b.name] = _node(s2b.name, "Pad", [s2b.inputs[0], (pad_const.name, 0)])
        conv.attrs.override("dilations", _ints_attr([1, bh, bw, 1]))
        begin = np.array([0, crops[0, 0], crops[1, 0], 0], np.int32)
        end = np.array([0, -crops[0, 1], -crops[1, 1], 0], np.int32)
        end_mask = 0b1001 | (0b0010 if crops[0, 1] == 0 else 0) | (0b0100 if crops[1, 1] == 0
                                                                   else 0)
        consts = [_const_node(f"{b2s.name}/{k}", v) for k, v in
                  (("begin", begin), ("end", end), ("strides", np.ones(4, np.int32)))]
        replaced[b2s.name] = _node(b2s.name, "StridedSlice",
                                   [b2s.inputs[0]] + [(c.name, 0) for c in consts],
                                   begin_mask=0b1001, end_mask=end_mask)
        added += [pad_const] + consts
    if not replaced:
        return nodes
    return added + [replaced.get(n.name, n) for n in nodes]

