"""Partition a refused ONNX source by capability, then merge regions.

Every node the refusals name runs in a standard ONNX segment (the source's own node); every
other node that depends on a graph input goes to a dialect segment, converted by ``convert``
with that segment's boundary tensors as ``--inputs``/``--outputs``. Segments are scheduled as
early as their inputs allow, which gives the fewest alternating segments for that labelling.
A dialect segment whose conversion is refused hands the refused nodes to the standard side
and the partition is made again (refused only for layout, it first holds the boundary
tensors the value comes from in the source's axis order); so does a boundary tensor the two
dialect segments around it would hold in different layouts. A dialect island without a
weight product (Conv, ConvTranspose, Gemm, MatMul) stays standard: it would add two segments
and move no multiply-accumulate work. Constant subgraphs are copied into each segment that reads
them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidModelError, NhwcOnnxError, UnsupportedOpError, UsageError
from ..options import SYMBOLIC, ConvertOptions
from .manifest import DIALECT, STANDARD, Entry
from .source import MAC_OPS, OnnxSource, read_source

log = logging.getLogger("nhwc_onnx.pipeline")

# Partitions tried before a dialect segment that keeps being refused is made standard whole.
MAX_ROUNDS = 12


@dataclass
class Planned:
    """One segment of a partition: its kind, its nodes (indices into the source's order) and
    its boundary tensors (source names)."""

    kind: str
    nodes: list[int]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


@dataclass
class Partition:
    source: OnnxSource
    segments: list[Planned]
    converted: dict[int, Any]  # segment index -> the dialect Model
    notes: list[str]  # what the report says of the partition (islands kept standard ...)
    refused: list[str]  # source nodes that run in standard segments because refused


def schedule(source: OnnxSource, standard: set[int]) -> list[Planned]:
    """The fewest alternating segments for this labelling: each node in the earliest
    segment of its kind after the segments of the nodes it reads."""
    best: list[Planned] | None = None
    wanted = set(source.outputs)  # a constant pipeline output is made by a segment too
    for first in (DIALECT, STANDARD):
        place: dict[int, int] = {}
        for i, node in enumerate(source.order):
            if not source.live[i] and not wanted.intersection(node.output):
                continue  # a constant subgraph: copied into the segments that read it
            kind = STANDARD if i in standard else DIALECT
            base = max((place[source.producer[t]] for t in source.node_reads(i)
                        if t in source.producer and source.producer[t] in place), default=0)
            if _kind(first, base) != kind:
                base += 1
            place[i] = base
        used = sorted(set(place.values()))
        offset = used[0] if used else 0
        segments = [Planned(_kind(first, k), []) for k in range(offset, (used[-1] + 1)
                                                                 if used else 0)]
        for i, k in place.items():
            segments[k - offset].nodes.append(i)
        if best is None or len(segments) < len(best):
            best = segments
    assert best is not None
    _boundaries(source, best)
    return best


def _kind(first: str, index: int) -> str:
    other = STANDARD if first == DIALECT else DIALECT
    return first if index % 2 == 0 else other


def _boundaries(source: OnnxSource, segments: list[Planned]) -> None:
    """Each segment's inputs (live tensors it reads but does not make) and outputs (what a
    later segment reads, and the pipeline's outputs)."""
    home = {}
    for k, seg in enumerate(segments):
        for i in seg.nodes:
            for o in source.order[i].output:
                if o:
                    home[o] = k
    live_inputs = set(source.inputs)
    for k, seg in enumerate(segments):
        reads: dict[str, None] = {}
        for i in sorted(seg.nodes):
            for t in source.node_reads(i):
                if home.get(t, -1) != k and (t in live_inputs or t in home):
                    reads[t] = None
        seg.inputs = list(reads)
    wanted = set(source.outputs)
    for _k, seg in enumerate(segments):
        read_later = {t for other in segments if other is not seg for t in other.inputs}
        seg.outputs = [o for i in sorted(seg.nodes) for o in source.order[i].output
                       if o and (o in read_later or o in wanted)]


def partition(source_path, options: ConvertOptions, refusal: UnsupportedOpError,
              convert_segment) -> Partition:
    """The partition of a source whose conversion ``refusal`` refused. ``convert_segment(
    options)`` converts the source with other options and returns the dialect Model (it
    raises like ``convert``)."""
    from ..frontends.topology import SourceGraph, SourceNode, locate

    source = read_source(source_path, options, run_unknown=True)
    graph = SourceGraph([SourceNode(source.names[i], n.op_type, source.node_reads(i),
                                    [o for o in n.output if o])
                         for i, n in enumerate(source.order)], list(source.inputs),
                        list(source.outputs))
    index = {name: i for i, name in enumerate(source.names)}
    standard: set[int] = set()
    refused_names: set[str] = set()

    def take(problems) -> bool:
        """Label the nodes the problems name standard; False when they name nothing new."""
        found, blocked, _unknown = locate(graph, [p.node for p in problems])
        before = len(standard)
        for name in found:
            standard.add(index[name])
            refused_names.add(name)
        for t in blocked:  # a tensor the dialect cannot hold: its producer or its readers
            if t in source.producer:
                standard.add(source.producer[t])
            standard.update(i for i, n in enumerate(source.order) if t in source.node_reads(i))
        standard.intersection_update(i for i, live in enumerate(source.live) if live)
        return len(standard) > before

    # Only the first refusals on each path: a node after a refused one was judged without the
    # shapes its input has (an op ONNX's inference does not know leaves them open); the
    # conversion of its segment judges it again and refuses it if it must.
    found, _, _ = locate(graph, [p.node for p in refusal.problems])
    after = _downstream(source, {index[n] for n in found})
    take([p for p in refusal.problems if not _names_only(locate(graph, [p.node]), after, index)])
    named_after = {index[n] for n in found} & after
    cache: dict[tuple, object] = {}
    notes: list[str] = []
    islands: set[int] = set()  # nodes kept standard: no MACs to move
    source_order: set[str] = set()  # boundary tensors held in the source's axis order
    for _round in range(MAX_ROUNDS * 4):
        segments = schedule(source, standard)
        if _merge_islands(source, segments, standard, notes, islands):
            continue
        converted = _convert_dialect_segments(
            source, segments, options, convert_segment, cache, source_order, notes, standard,
            lambda problems, this_round=_round: take(problems) and this_round < MAX_ROUNDS)
        if converted is None:
            continue
        moved = _layout_conflicts(source, segments, converted, options)
        if moved:
            standard.update(moved)
            continue
        notes = [n for n in notes if n != ISLAND]
        # a node the first refusal named after an earlier one, left standard: refused too
        refused_names.update(source.names[i] for i in named_after & standard)
        kept = sorted((islands & standard) - named_after)
        if kept:
            notes.append(_islands_note(source, kept))
        return Partition(source, segments, converted, notes, sorted(refused_names))
    raise InvalidModelError("the partition did not settle; please report this model")


def _convert_dialect_segments(source, segments, options, convert_segment, cache: dict,
                              source_order: set[str], notes: list[str], standard: set[int],
                              take_refused) -> dict | None:
    """Each dialect segment converted (cached by its boundary), or None when one is refused
    and the partition must be scheduled again: its boundary tensors held in the source's
    order, its refused nodes labelled standard (``take_refused``), or, when neither helps,
    all its nodes standard, said in ``notes``."""
    converted = {}
    for k, seg in enumerate(segments):
        if seg.kind != DIALECT:
            continue
        kept = tuple(sorted(source_order & (set(seg.inputs) | set(seg.outputs))))
        key = (tuple(seg.inputs), tuple(seg.outputs), kept)
        if key not in cache:
            cache[key] = _convert_segment(source, seg, options, convert_segment, kept)
        result = cache[key]
        if isinstance(result, UnsupportedOpError):
            keep = _boundary_layouts_to_keep(source, seg, result, source_order)
            if keep:  # resolved by the boundary: hold those tensors as the source does
                source_order.update(keep)
                return None
            if not take_refused(result.problems):
                notes.append(f"dialect segment {len(notes)}: its conversion was refused "
                             f"({_first_line(result)}); its nodes run as standard ONNX")
                standard.update(seg.nodes)
            return None
        if isinstance(result, NhwcOnnxError):
            notes.append(f"a dialect segment of {len(seg.nodes)} node(s) could not be "
                         f"converted ({_first_line(result)}); its nodes run as standard ONNX")
            standard.update(seg.nodes)
            return None
        converted[k] = result
    return converted


def _islands_note(source, kept: list[int]) -> str:
    ops: dict[str, int] = {}
    for i in kept:
        ops[source.order[i].op_type] = ops.get(source.order[i].op_type, 0) + 1
    return (f"{len(kept)} node(s) no conversion refused run in standard segments "
            f"({', '.join(f'{op} x{n}' for op, n in sorted(ops.items()))}): as dialect "
            "segments of their own they would add segments without multiply-accumulate work")


ISLAND = "island"  # a note's placeholder: an island kept standard (said once, in the end)


def estimate(source_path, options: ConvertOptions, refusal: UnsupportedOpError) -> str:
    """One line: how ``--split`` would cut this refused source, from the refusals alone (no
    segment is converted, so a segment may still give up nodes): segments by kind and the
    share of MACs in dialect segments."""
    from ..frontends.topology import SourceGraph, SourceNode, locate

    source = read_source(source_path, options)
    graph = SourceGraph([SourceNode(source.names[i], n.op_type, source.node_reads(i),
                                    [o for o in n.output if o])
                         for i, n in enumerate(source.order)], list(source.inputs),
                        list(source.outputs))
    found, blocked, _ = locate(graph, [p.node for p in refusal.problems])
    index = {name: i for i, name in enumerate(source.names)}
    standard = {index[n] for n in found} | {source.producer[t] for t in blocked
                                            if t in source.producer}
    for _ in range(len(source.order) + 1):
        segments = schedule(source, standard)
        if not _merge_islands(source, segments, standard, [], set()):
            break
    macs = [sum(source.macs(i) for i in seg.nodes) for seg in segments]
    dialect = sum(m for m, seg in zip(macs, segments) if seg.kind == DIALECT)
    count = sum(1 for seg in segments if seg.kind == DIALECT)
    share = f"{100 * dialect / sum(macs):.1f}% of MACs" if sum(macs) else "no MACs"
    return (f"with --split (estimated from these refusals): {len(segments)} segment(s) "
            f"({count} dialect, {len(segments) - count} standard ONNX), {share} in dialect "
            "segments")


def _downstream(source: OnnxSource, nodes: set[int]) -> set[int]:
    """Nodes that read (through any path) an output of ``nodes``, not ``nodes`` themselves
    unless one of them is after another."""
    tainted: set[str] = set()
    found: set[int] = set()
    for i, node in enumerate(source.order):
        if any(t in tainted for t in source.node_reads(i)):
            found.add(i)
            tainted.update(o for o in node.output if o)
        elif i in nodes:
            tainted.update(o for o in node.output if o)
    return found


def _names_only(located, after: set[int], index: dict[str, int]) -> bool:
    """Whether a problem names nodes after an earlier refusal and nothing else."""
    found, blocked, unknown = located
    return bool(found) and not blocked and not unknown and all(index[n] in after for n in found)


def _merge_islands(source: OnnxSource, segments: list[Planned], standard: set[int],
                   notes: list[str], kept_standard: set[int]) -> bool:
    """Label standard every dialect segment without a weight product, when there is a
    standard segment at all; True when one was."""
    if all(seg.kind == DIALECT for seg in segments):
        return False
    changed = False
    for seg in segments:
        if seg.kind == DIALECT and not any(source.order[i].op_type in MAC_OPS
                                           for i in seg.nodes):
            notes.append(ISLAND)
            standard.update(seg.nodes)
            kept_standard.update(seg.nodes)
            changed = True
    return changed


def _boundary_layouts_to_keep(source: OnnxSource, seg: Planned, refusal: UnsupportedOpError,
                              kept: set[str]) -> set[str]:
    """When a segment is refused only for layout (a node reads a value in the source's axis
    order that the dialect stores NHWC), the segment's inputs that value comes from, made by
    the pipeline (not its graph inputs, which the user's --keep-layout governs) and not kept
    in the source's order yet; empty otherwise."""
    if not refusal.problems or any(p.rule != "layout" for p in refusal.problems):
        return set()
    names = {source.names[i]: i for i in seg.nodes}
    stack = [names[p.node] for p in refusal.problems if p.node in names]
    members, seen, found = set(seg.nodes), set(), set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        for t in source.node_reads(i):
            p = source.producer.get(t)
            if p in members:
                stack.append(p)
            elif t in seg.inputs and t not in source.inputs:
                found.add(t)
    return found - kept


def segment_options(source: OnnxSource, seg: Planned, options: ConvertOptions,
                    source_order: tuple[str, ...] = ()) -> ConvertOptions:
    """The options that convert exactly this segment: its boundary as --inputs/--outputs,
    each input's shape (a symbolic batch as -1), the renames and preprocessing of its own
    graph inputs and outputs; ``source_order``: boundary tensors kept in the source's axis
    order."""
    graph_inputs = set(source.inputs)
    shapes = {k: v for k, v in options.input_shapes.items() if k in seg.inputs}
    for t in seg.inputs:
        if t in graph_inputs:
            continue  # read as the source declares it, with the user's shape and batch
        shape = source.shapes.get(t)
        if shape is None:
            raise InvalidModelError(f"tensor '{t}' has no known shape at a segment boundary")
        axes = source.batch_axes.get(t, set())
        if axes - {0} or (options.batch is not None and shape and shape[0] != options.batch):
            # --batch sets axis 0 of every --inputs tensor: this one's axis 0 is no batch
            raise UnsupportedOpError([], "onnx", hint=f"'{t}' mixes the batch with other axes")
        shapes[t] = tuple(SYMBOLIC if (i == 0 and 0 in axes) else int(d)
                          for i, d in enumerate(shape))
    names = set(seg.inputs) | set(seg.outputs)
    return options.replace(
        inputs=tuple(seg.inputs), outputs=tuple(seg.outputs), input_shapes=shapes,
        exact_cut=False, rename={k: v for k, v in options.rename.items() if k in names},
        keep_layout=tuple(n for n in options.keep_layout if n in names) + tuple(
            n for n in source_order if n not in options.keep_layout),
        mean={k: v for k, v in options.mean.items() if k in names or k == ""},
        std={k: v for k, v in options.std.items() if k in names or k == ""},
        reverse_channels=tuple(n for n in options.reverse_channels if n in names or n == ""))


def _convert_segment(source: OnnxSource, seg: Planned, options: ConvertOptions,
                     convert_segment, source_order: tuple[str, ...] = ()):
    try:
        return convert_segment(segment_options(source, seg, options, source_order))
    except NhwcOnnxError as exc:
        if isinstance(exc, UnsupportedOpError) and not exc.problems:
            # a boundary the dialect cannot take: the readers of the tensor go standard
            return UnsupportedOpError(
                [_problem(source, i) for i in seg.nodes
                 if set(source.node_reads(i)) & set(seg.inputs)
                 and any(_not_a_batch_boundary(source, t, options)
                         for t in source.node_reads(i) if t in seg.inputs)], "onnx")
        return exc


def _not_a_batch_boundary(source: OnnxSource, t: str, options: ConvertOptions) -> bool:
    shape = source.shapes.get(t) or ()
    return t not in source.inputs and bool(
        source.batch_axes.get(t, set()) - {0}
        or (options.batch is not None and shape and shape[0] != options.batch))


def _problem(source: OnnxSource, i: int):
    from ..errors import NodeProblem

    return NodeProblem(source.names[i], source.order[i].op_type, "boundary")


def _layout_conflicts(source, segments, converted, options) -> set[int]:
    """Nodes of dialect segments that read a tensor in another layout than the one it has
    (made by another dialect segment, or read by two): they go standard."""
    held: dict[str, list[int] | None] = {}
    moved: set[int] = set()
    for k, seg in enumerate(segments):
        if seg.kind != DIALECT:
            continue
        model = converted[k]
        perms = dict(model.io_permutations)
        for t in seg.inputs + seg.outputs:
            perm = _normal(perms.get(options.rename.get(t, t)))
            if t in held and held[t] != perm:
                moved.update(i for i in seg.nodes if t in source.node_reads(i))
            held.setdefault(t, perm)
    return moved


def _normal(perm) -> list[int] | None:
    if perm is None or list(perm) == list(range(len(perm))):
        return None
    return [int(p) for p in perm]


def tensor_layouts(partition: Partition, options: ConvertOptions) -> dict[str, list[int] | None]:
    """The permutation every boundary tensor has in the pipeline: the dialect's where a
    dialect segment makes or reads it, else the source's (None)."""
    layouts: dict[str, list[int] | None] = {}
    for k, seg in enumerate(partition.segments):
        if seg.kind != DIALECT:
            continue
        perms = dict(partition.converted[k].io_permutations)
        for t in seg.outputs + seg.inputs:
            layouts.setdefault(t, _normal(perms.get(options.rename.get(t, t))))
    for seg in partition.segments:
        for t in seg.inputs + seg.outputs:
            layouts.setdefault(t, None)
    for t in partition.source.inputs + partition.source.outputs:
        layouts.setdefault(t, None)
    return layouts


def entry(source: OnnxSource, tensor: str, perm: list[int] | None,
          options: ConvertOptions) -> Entry:
    """A boundary tensor as the manifest lists it: in the pipeline's layout, a symbolic
    batch by its name."""
    shape = source.shapes.get(tensor)
    if shape is None:
        raise InvalidModelError(f"tensor '{tensor}' has no known shape at a segment boundary")
    axes = source.batch_axes.get(tensor, set())
    dims: list = [source.symbol if (i in axes and source.symbol) else int(d)
                  for i, d in enumerate(shape)]
    if perm:
        dims = [dims[p] for p in perm]
    return Entry(options.rename.get(tensor, tensor), dims,
                 source.dtypes.get(tensor, "float32"), perm)


def standard_segment(source: OnnxSource, seg: Planned, layouts: dict, options: ConvertOptions,
                     name: str):
    """The segment's own source nodes as a standard ONNX model: the source's opset, attributes
    and weights; a Transpose at an edge where the pipeline holds a tensor in the dialect's
    layout. Returns (ModelProto, inputs, outputs)."""
    import onnx
    from onnx import helper

    taken = {o for n in source.order for o in n.output} | set(source.consts) | set(
        source.inputs)
    inner: dict[str, str] = {}
    edge_nodes_in, edge_nodes_out = [], []

    def local(t: str) -> str:
        base, n = f"{t}__source_layout", 0
        while base in taken:
            n += 1
            base = f"{t}__source_layout_{n}"
        taken.add(base)
        return base

    inputs = [entry(source, t, layouts.get(t), options) for t in seg.inputs]
    outputs = [entry(source, t, layouts.get(t), options) for t in seg.outputs]
    for t, e in zip(seg.inputs, inputs):
        if e.permutation:
            inner[t] = local(t)
            edge_nodes_in.append(helper.make_node(
                "Transpose", [e.name], [inner[t]], perm=[int(p) for p in np.argsort(e.permutation)],
                name=f"{inner[t]}/transpose"))
        elif e.name != t:
            inner[t] = e.name
    for t, e in zip(seg.outputs, outputs):
        if e.permutation:
            inner[t] = local(t)
            edge_nodes_out.append(helper.make_node(
                "Transpose", [inner[t]], [e.name], perm=list(e.permutation),
                name=f"{inner[t]}/transpose"))
        elif e.name != t:
            inner[t] = e.name
    members = set(seg.nodes)
    needed: set[str] = set()
    for i in seg.nodes:
        needed.update(source.node_reads(i))
    helpers: set[int] = set()  # constant subgraphs the segment reads
    stack = [t for t in needed]
    while stack:
        t = stack.pop()
        p = source.producer.get(t)
        if p is not None and not source.live[p] and p not in helpers:
            helpers.add(p)
            stack.extend(source.node_reads(p))
            needed.update(source.node_reads(p))
    nodes = []
    for i, node in enumerate(source.order):
        if i in members or i in helpers:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            _rename(copy, inner)
            nodes.append(copy)
    inits = [t for t in source.proto.graph.initializer if t.name in needed]
    graph = helper.make_graph(
        edge_nodes_in + nodes + edge_nodes_out, name,
        [e.value_info() for e in inputs], [e.value_info() for e in outputs], inits)
    model = helper.make_model(graph, opset_imports=list(source.proto.opset_import),
                              producer_name="nhwc-onnx")
    model.ir_version = max(source.proto.ir_version, 3)
    for func in source.proto.functions:
        model.functions.append(func)
    return model, inputs, outputs


def _rename(node, names: dict[str, str]) -> None:
    """Rename tensors in a node and in the outer references of its subgraphs."""
    for j, t in enumerate(node.input):
        if t in names:
            node.input[j] = names[t]
    for j, t in enumerate(node.output):
        if t in names:
            node.output[j] = names[t]
    for attr in node.attribute:
        _rename_subgraph_reads(attr, names)


def _rename_subgraph_reads(attr, names: dict[str, str]) -> None:
    """The reads of outer tensors inside a control-flow attribute's subgraphs, renamed (a name
    a subgraph defines itself shadows the outer one)."""
    graphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
    for g in graphs:
        own = {o for n in g.node for o in n.output} | {i.name for i in g.input}
        outer = {k: v for k, v in names.items() if k not in own}
        for n in g.node:
            for j, t in enumerate(n.input):
                if t in outer:
                    n.input[j] = outer[t]
            for a in n.attribute:
                _rename_subgraph_reads(a, outer)


def check_split_options(source: OnnxSource, partition: Partition, options: ConvertOptions
                        ) -> None:
    """--rename of a name the pipeline does not have, and preprocessing of a graph input a
    standard segment reads (the standard side would have to compute it): a UsageError."""
    reads_standard = {t for seg in partition.segments if seg.kind == STANDARD
                      for t in seg.inputs + seg.outputs}
    unknown = [k for k in options.rename if k not in source.inputs + source.outputs]
    if unknown:
        raise UsageError(f"--rename names {', '.join(map(repr, unknown))}, which is no graph "
                         "input or output of the pipeline")
    pre = set(options.mean) | set(options.std) | set(options.reverse_channels)
    if "" in pre:
        pre |= set(source.inputs)
    blocked = sorted(pre & reads_standard)  # --keep-layout: a standard segment keeps it anyway
    if blocked:
        raise UsageError(f"{', '.join(map(repr, blocked))} is read by a standard segment of "
                         "the split: --mean, --std and --reverse-channels apply to inputs only "
                         "dialect segments read")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
