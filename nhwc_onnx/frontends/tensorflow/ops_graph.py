"""Graph plumbing: constants, inputs, pass-through ops (they add no core node)."""
from __future__ import annotations

from ...ir import Value
from .context import Refusal, TFContext
from .registry import REGISTRY
from .tfnodes import TFNode


@REGISTRY.register("Const", emits=())
def convert_const(ctx: TFContext, node: TFNode) -> list[Value]:
    """A constant tensor (becomes an initializer)."""
    array = node.attrs.tensor("value")
    if array is None:
        raise Refusal("Const has no 'value' tensor")
    name = ctx.own_name()
    return [ctx.graph.constant(array, name)]


@REGISTRY.register("Placeholder", emits=())  # a graph input
def convert_placeholder(ctx: TFContext, node: TFNode) -> list[Value]:
    """A graph input; reaching it here means it was left out of --inputs."""
    raise Refusal("this Placeholder is needed by the outputs but is not among the given inputs")


@REGISTRY.register("PlaceholderWithDefault", emits=())
def convert_placeholder_with_default(ctx: TFContext, node: TFNode) -> list[Value]:
    """Not fed: its default value (name it in --inputs to make it a graph input)."""
    ctx.mark_read(*ctx.attribute_names())  # the shape it declares leaves the value as it is
    return [ctx.input(0)]


@REGISTRY.register("Identity", "StopGradient", "Snapshot", "PreventGradient", "CheckNumerics",
                   "EnsureShape", "DebugIdentity", emits=())
def convert_identity(ctx: TFContext, node: TFNode) -> list[Value]:
    """Passes its input through at inference."""
    # what its attributes say (an error message, a shape it asserts, debugging settings)
    # leaves the value as it is
    ctx.mark_read(*ctx.attribute_names())
    return [ctx.input(0)]


@REGISTRY.register("IdentityN", emits=())
def convert_identity_n(ctx: TFContext, node: TFNode) -> list[Value]:
    """Passes every input through."""
    return ctx.inputs()


@REGISTRY.register("NoOp", emits=())
def convert_noop(ctx: TFContext, node: TFNode) -> list[Value]:
    """Orders execution only: no data."""
    return []
