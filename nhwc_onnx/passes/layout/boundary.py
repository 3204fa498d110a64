"""The layout contract at the graph boundary (docs/layout.md).

Graph inputs: every channels-first image input (rank 4/5 of an NCHW-convention source, and an
N,C,L map read by 1-D convolutions) is stored channels-last, whichever ops follow, with its
permutation recorded. Graph outputs: an image output is given back NHWC. The exceptions, each
recorded: a name the user keeps (``keep_layout``); an input the source itself transposes to
NCHW first (tf2onnx's Transpose(0,3,1,2)) and an output it transposes back (Transpose(0,2,3,1));
an input read only as a batch of matrices (MatMul); an output that is no image (computed in
source order, or a rank-3 tensor that is no N,C,L map).
"""
from __future__ import annotations

from ...errors import UsageError
from ...ir import NCHW, NHWC, Model, Node, Value
from ...ir.io_names import public_names
from ..base import PassContext
from .images import is_spatial, reads_nchw_image
from .perm import Perm, channels_first_perm, channels_last, identity, is_identity, same_bytes
from .walk import LayoutWalk


def _perm_of(node: Node) -> list[int] | None:
    perm = node.attrs.get("perm")
    return None if perm is None else [int(a) for a in perm]


def _permutes(node: Node, perm: list[int]) -> bool:
    """Whether ``node`` is a Transpose by ``perm``, or a Reshape that computes the same: one
    that only moves size-1 axes (tf2onnx writes the NHWC -> NCHW Transpose of a one-channel
    input as Reshape (N, H, W, 1) -> (N, 1, H, W))."""
    if node.op == "Transpose":
        return _perm_of(node) == perm
    if node.op != "Reshape" or not node.inputs:
        return False
    x = node.inputs[0]
    src, out = (x.shape if x is not None else None), node.outputs[0].shape
    if src is None or out is None or len(src) != len(perm):
        return False
    moved = [a for a in perm if src[a] != 1]
    return tuple(out) == tuple(src[a] for a in perm) and moved == sorted(moved)


def keep_layout_names(model: Model, ctx: PassContext) -> set[str]:
    """Graph input/output names (any of ``public_names``) listed in option ``keep_layout``.

    A name that is no graph input or output is a usage error, raised before any work."""
    wanted = list(ctx.options.keep_layout)
    io = model.graph.inputs + model.graph.outputs
    known = set().union(*(public_names(v) for v in io)) if io else set()
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise UsageError(f"--keep-layout names {', '.join(repr(n) for n in unknown)}, which "
                         f"is not a graph input or output (they are: "
                         f"{', '.join(sorted(v.name for v in io))})")
    return {v.name for v in io if public_names(v) & set(wanted)}


def seed_inputs(state: LayoutWalk, model: Model, keep: set[str]) -> list[Value]:
    """Store every channels-first image input (rank 4/5 of an NCHW-convention source) NHWC.

    The layout contract (docs/layout.md): the decision does not depend
    on which ops follow. Exceptions, each recorded: an input the user keeps (--keep-layout); one
    the source itself transposes to NCHW first (only read by Transpose(0,3,1,2)): it is NHWC
    already and that Transpose disappears; one read only as a batch of matrices (MatMul).
    Returns the inputs stored NHWC.
    """
    graph = model.graph
    seeded = []
    for v in graph.inputs:
        if (not v.is_const and v.shape is not None and len(v.shape) == 3 and v.uses()
                and v.name not in keep
                and all(_reads_as_1d_map(n, i) for n, i in v.uses())):
            _seed(state, model, v, (0, 2, 1), "graph input N,C,L -> stored N,L,C (a 1-D "
                  "feature map)")
            seeded.append(v)
            continue
        if v.is_const or v.shape is None or len(v.shape) not in (4, 5):
            continue
        uses = v.uses()
        rank = len(v.shape)
        if any(is_spatial(node.op) and index > 0 for node, index in uses):
            continue  # a weight fed at run time keeps its own layout attribute
        if v.layout != NCHW and not (v.layout is None and rank == 4 and any(
                reads_nchw_image(n, i) for n, i in uses)):
            continue  # channels-last by its framework's convention (TF NHWC), or not an image
        if v.name in keep:
            state.ctx.record("layout", v.name, "graph input kept in source axis order "
                             "(--keep-layout)", perm=list(identity(rank)))
            continue
        if uses and all(_permutes(n, channels_first_perm(rank)) for n, _ in uses):
            v.layout = NHWC
            state.ctx.record("layout", v.name, "graph input is NHWC at the source (only read by "
                             "a Transpose to NCHW, which disappears)", perm=list(identity(rank)))
            continue
        if uses and all(n.op == "MatMul" for n, _ in uses):
            state.ctx.record("layout", v.name, "graph input read only as a batch of matrices "
                             "(MatMul): not an image, kept in source axis order",
                             perm=list(identity(rank)))
            continue
        _seed(state, model, v, channels_last(rank), "graph input NCHW -> stored NHWC")
        seeded.append(v)
    return seeded


def _seed(state: LayoutWalk, model: Model, v: Value, sigma: Perm, why: str) -> None:
    state.set_sig(v, sigma)
    model.io_permutations[v.name] = list(sigma)
    state.ctx.record("layout", v.name, why, perm=list(sigma))
    state.changed = True


def _reads_as_1d_map(node: Node, index: int) -> bool:
    """Whether ``node`` reads its rank-3 input ``index`` as an N,C,L feature map: a 1-D
    conv/pool (lifted to N,C,1,L or N,C,L,1 for a 2-D NCHW op, by a Reshape or, as older
    PyTorch exports a 1-D pool, an Unsqueeze) or a BatchNormalization over C."""
    if index != 0:
        return False
    if node.op == "BatchNormalization":
        return node.attrs.get("axis", 1) in (1, -2)
    if node.op not in ("Reshape", "Unsqueeze"):
        return False
    x, out = node.inputs[0], node.outputs[0]
    if x is None or x.shape is None or out.shape is None or len(out.shape) != 4:
        return False
    n, c, length = x.shape
    lifted = tuple(out.shape) in ((n, c, 1, length), (n, c, length, 1))
    return lifted and bool(out.uses()) and all(reads_nchw_image(n, i) for n, i in out.uses())


def channels_first_model(model: Model) -> bool:
    """Whether rank-4 tensors follow the NCHW convention (ONNX, Caffe, TF in NCHW)."""
    graph = model.graph
    return (any(v.layout == NCHW for v in graph.inputs + graph.outputs)
            or any(is_spatial(n.op) and n.attrs.get("data_format", "NCHW") == "NCHW"
                   for n in graph.nodes))


def source_transposed_outputs(model: Model) -> set[int]:
    """Graph outputs the source itself makes channels-last (Transpose(0,2,3,1) as last op)."""
    found = set()
    for v in model.graph.outputs:
        node = v.producer()
        if (node is not None and node.op == "Transpose" and v.rank in (4, 5)
                and _perm_of(node) == list(channels_last(v.rank))):
            found.add(id(v))
    return found


def image_output_layouts(model: Model, keep: set[str], nchw: bool,
                         transposed: set[int]) -> dict[int, Perm]:
    """The layout the contract asks of each image graph output (rank 4/5 of a channels-first
    source, not kept, not made channels-last by the source itself): channels-last. The walk
    stores values it may lay out freely (a Transpose's result) that way when they lead there."""
    if not nchw:
        return {}
    return {id(v): channels_last(v.rank) for v in model.graph.outputs
            if not v.is_const and v.rank in (4, 5) and v.name not in keep
            and id(v) not in transposed and v not in model.graph.inputs}


def settle_outputs(state: LayoutWalk, model: Model, keep: set[str], nchw: bool,
                    transposed: set[int]) -> None:
    """Give each graph output its contract layout (NHWC image, kept, or not an image)."""
    graph = model.graph
    # With --allow-transpose, an output computed from an NHWC-stored input that ended in source
    # order after an inserted layout Transpose is still an image: it goes back to NHWC as well.
    inserted = state.allow_transpose and state.problems
    from_images = {id(n) for v in graph.inputs if inserted and state.permuted(v)
                   for n in reached_nodes(v)}
    for i, v in enumerate(list(graph.outputs)):
        if v.is_const or v.shape is None:
            continue
        src = state.src_shape(v)
        rank, sigma = len(src), state.sig(v)
        if v.name in keep:
            target = identity(rank)
        elif rank < 4 and not is_identity(sigma) and tuple(sigma) != (0, 2, 1):
            target = identity(rank)  # not an N,C,L map (e.g. a squeezed batch): source order
        elif rank in (4, 5) and nchw and is_identity(sigma) and id(v) not in transposed:
            if v in graph.inputs or not (same_bytes(src, sigma, channels_last(rank))
                                         or id(v.producer()) in from_images):
                state.ctx.record("layout", v.name, "graph output computed in source axis order "
                                 "(not an image: e.g. a MatMul result, or a map built in source "
                                 "order from lower-rank values, which only a layout Transpose "
                                 "could make NHWC); kept as it is", perm=list(sigma))
                continue
            target = channels_last(rank)  # e.g. [N,C,1,1] logits: a free Reshape
        else:
            continue
        if tuple(target) != tuple(sigma):
            _relayout_output(state, i, v, target)


def _relayout_output(state: LayoutWalk, index: int, v: Value, target: Perm) -> None:
    """Graph output ``index`` (value ``v``) re-laid out to ``target`` under its own name."""
    graph = state.graph
    src = state.src_shape(v)
    reader = graph.make_node("Identity", [v], name=f"{v.name}/layout")
    wanted = "the source order (--keep-layout)" if is_identity(target) else "NHWC"
    state.coerce(reader, 0, target, f"graph output '{v.name}' is stored with permutation "
                 f"{list(state.sig(v))} of its source axes; {wanted} needs a layout Transpose")
    moved = reader.inputs[0]
    assert moved is not None  # coerce() rewires the reader's input, never drops it
    graph.remove_node(reader)
    producer = v.producer()
    if state.problems and state.problems[-1].node == reader.name and producer is not None:
        state.blamed.add(producer.name)  # so the hint can name the inputs behind it
    if moved is v:
        return
    name, meta = v.name, dict(v.meta)
    v.name = graph.unique_name(f"{name}/stored")
    moved.name = name
    moved.meta.update(meta)
    graph.outputs[index] = moved
    state.src[id(moved)] = tuple(src)
    state.set_sig(moved, target)


def reached_nodes(v: Value) -> list[Node]:
    seen: dict[int, Node] = {}
    todo = [v]
    while todo:
        for node, _ in todo.pop().uses():
            if id(node) not in seen:
                seen[id(node)] = node
                todo.extend(node.outputs)
    return list(seen.values())
