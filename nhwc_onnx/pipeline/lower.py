"""A pipeline as one standard ONNX model (``lower`` of a pipeline): each dialect segment
lowered as ``lower`` lowers a dialect model, each standard segment brought to the same opset,
their graphs joined at the tensors they pass (names kept), every other name prefixed by its
segment so that two segments never share one."""
from __future__ import annotations

import os

from ..errors import InvalidModelError
from .manifest import DIALECT


def lowered_pipeline(pipeline):
    """The joined ModelProto, checked by onnx.checker."""
    import onnx
    from onnx import helper, version_converter

    from ..ir.metadata import KEY_IO_PERMUTATIONS, encode_io_permutations
    from ..runtime.standard_onnx import LOWERED_IR_VERSION, LOWERED_OPSET, lower_model
    from .partition import _rename

    manifest = pipeline.manifest
    boundary = {e.name for e in manifest.inputs + manifest.outputs} | {
        e.name for s in manifest.segments for e in s.inputs + s.outputs}
    nodes, inits, opsets, functions = [], [], {"": LOWERED_OPSET}, []
    for _k, seg in enumerate(manifest.segments):
        model = pipeline.models[seg.file]
        if seg.kind == DIALECT:
            proto = lower_model(model)
        else:
            proto = model
            version = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")),
                           LOWERED_OPSET)
            if version != LOWERED_OPSET:
                try:
                    proto = version_converter.convert_version(proto, LOWERED_OPSET)
                except Exception as exc:  # noqa: BLE001 - the converter raises assorted types
                    raise InvalidModelError(
                        f"{seg.file}: its opset {version} cannot be brought to opset "
                        f"{LOWERED_OPSET} to join the other segments ({exc})") from None
            for o in proto.opset_import:
                if o.domain not in ("", "ai.onnx"):
                    opsets[o.domain] = o.version
            functions += list(proto.functions)
        prefix = f"{os.path.splitext(seg.file)[0]}/"
        own = {o for n in proto.graph.node for o in n.output if o} | {
            t.name for t in proto.graph.initializer}
        mapping = {t: prefix + t for t in own - boundary}
        for node in proto.graph.node:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            _rename(copy, mapping)
            copy.name = prefix + (node.name or node.op_type)
            nodes.append(copy)
        for t in proto.graph.initializer:
            copy = onnx.TensorProto()
            copy.CopyFrom(t)
            copy.name = mapping.get(t.name, t.name)
            inits.append(copy)
    graph = helper.make_graph(nodes, "pipeline", [e.value_info() for e in manifest.inputs],
                              [e.value_info() for e in manifest.outputs], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v)
                                                    for d, v in opsets.items()],
                              producer_name="nhwc-onnx")
    proto.ir_version = LOWERED_IR_VERSION
    proto.functions.extend(functions)
    perms = {e.name: e.permutation for e in manifest.inputs + manifest.outputs if e.permutation}
    helper.set_model_props(proto, {KEY_IO_PERMUTATIONS: encode_io_permutations(perms)})
    onnx.checker.check_model(proto)
    return proto


def save_lowered_pipeline(pipeline, output, inputs=()):
    """Write ``lowered_pipeline`` to ``output`` atomically (checked like convert's -o)."""
    from pathlib import Path

    from ..files.writes import atomic_write, plan_targets

    out = Path(output)
    plan_targets([("output", out)], [Path(p) for p in inputs if p is not None])
    proto = lowered_pipeline(pipeline)
    atomic_write(out, lambda handle: handle.write(proto.SerializeToString(deterministic=True)))
    return proto
