"""The names of a model's graph inputs and outputs: the ones its user addresses the source by.

A frontend names each graph input/output as its source does (ONNX and Caffe tensors, a frozen
graph's tensor without ``:0``) and, where users know it by another name, puts that name in
``meta["user_name"]`` (a Keras model's input and output layer names, a SavedModel signature's
keys). ``name_graph_io`` gives every input and output that name - inputs first, in order, then
outputs; a name already taken gets ``_1``, ``_2`` ... - then applies the user's renames
(OLD -> NEW). Each value keeps the source tensor it is in ``meta["source_name"]`` (what
verification feeds and fetches) and, when renamed, the name it had in ``meta["default_name"]``.
"""
from __future__ import annotations

from collections.abc import Mapping

from ..errors import UsageError
from .core import Model, Value


def public_names(value: Value) -> set[str]:
    """Every name an option may use for a graph input or output: its name, the one it had
    before a rename, and its source tensor with or without ``:0``."""
    source = str(value.meta.get("source_name", value.name))
    names = {value.name, source, source.split(":")[0] if ":" in source else source}
    if value.meta.get("default_name"):
        names.add(str(value.meta["default_name"]))
    return names


def graph_io(model: Model) -> list[Value]:
    """Graph inputs then outputs, each value once."""
    seen: dict[int, Value] = {}
    for v in model.graph.inputs + model.graph.outputs:
        seen.setdefault(id(v), v)
    return list(seen.values())


def name_graph_io(model: Model, rename: Mapping[str, str] | None = None) -> None:
    """Name the graph inputs and outputs as users know them, then apply ``rename``.

    UsageError (``--rename``) when an OLD name is no graph input or output, or when a NEW one
    is the name of another input or output."""
    io = graph_io(model)
    taken: set[str] = set()
    defaults = []
    for v in io:
        wanted = str(v.meta.get("user_name") or v.name)
        name, k = wanted, 0
        while name in taken:
            k += 1
            name = f"{wanted}_{k}"
        taken.add(name)
        defaults.append(name)
    rename = dict(rename or {})
    unknown = [old for old in rename if old not in taken]
    if unknown:
        raise UsageError(f"{', '.join(map(repr, unknown))} is not a graph input or output "
                         f"(they are: {', '.join(defaults)})", param_hint="--rename")
    final = [rename.get(name, name) for name in defaults]
    for new in set(rename.values()):
        if final.count(new) > 1:
            raise UsageError(f"'{new}' would name two graph inputs/outputs (it is already "
                             f"one: pick another name)", param_hint="--rename")
    for v, default, new in zip(io, defaults, final):
        v.meta.setdefault("source_name", v.name)
        if new != default:
            v.meta["default_name"] = default
    _apply(model, io, final)


def _apply(model: Model, io: list[Value], names: list[str]) -> None:
    """Give each value of ``io`` its name; another value holding one of them moves aside."""
    graph = model.graph
    changes = [(v, name) for v, name in zip(io, names) if v.name != name]
    if not changes:
        return
    ours = {id(v) for v in io}
    wanted = {name for _, name in changes}
    for v in graph.values():
        if id(v) not in ours and v.name in wanted:
            graph.reserve_name(v.name)
            graph.rename_value(v, v.name)  # an internal tensor: a fresh name beside its own
    moved = {name: model.io_permutations.pop(v.name) for v, name in changes
             if v.name in model.io_permutations}
    for v, _ in changes:  # free every old name first: renames may swap names
        graph.release_name(v.name)
    for v, name in changes:
        v.name = name
        graph.reserve_name(name)
    model.io_permutations.update(moved)
