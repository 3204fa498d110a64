"""What all frontends share: the converter registry and the one conversion loop (the
converter's context and the refusal type are in ``context.py``; the options are
``nhwc_onnx.options.ConvertOptions``).

Every converter has the signature ``fn(ctx, node)``: the frontend's context (a
``context.NodeContext``: the node, its attributes, values built so far, emit helpers) and the
source node. ``convert_nodes`` runs them in order under one policy:

- the registry scan lists every op without a converter up front;
- a converter raises ``Refusal(reason)`` when the node has no exact core form: the loop notes it
  and goes on, skipping the nodes that depend on it, and raises ONE UnsupportedOpError at the end
  (or, asked to keep going, returns the problems: see ``keeps_going``);
- a node carrying an attribute with an effect that its converter never read is refused the
  same way (converting without it would compute something else);
- a project error (InvalidModelError, InvalidAttributeError ...) means the user's model is
  broken: raised at once, carrying the node (``NhwcOnnxError.where``) and naming it once;
- anything else (KeyError, IndexError, TypeError ...) is a bug in nhwc-onnx: ConversionBugError
  naming the node, never blamed on the model.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from ..errors import (
    ConversionBugError,
    ConversionContext,
    InvalidAttributeError,
    InvalidModelError,
    ModelLoadError,
    NhwcOnnxError,
    NodeProblem,
    UnsupportedOpError,
    located,
)
from ..ir import UNCONVERTED, Graph, Value
from .context import NodeContext, Refusal, unread_refusal

N = TypeVar("N")

# Largest source graph converted (nodes, Caffe layers, inlined function bodies included).
# Conversion is linear but costs about a millisecond per node: bigger inputs are refused up
# front, before the heavy work, instead of running for many minutes (docs/cli.md: "Limits").
MAX_SOURCE_NODES = 100_000


def check_node_count(count: int, what: str, noun: str = "nodes") -> None:
    """Refuse a source graph of more than MAX_SOURCE_NODES nodes (``what`` names it)."""
    if count > MAX_SOURCE_NODES:
        raise InvalidModelError(f"{what} has {count} {noun}, more than the {MAX_SOURCE_NODES} "
                                "nhwc-onnx converts; refused")


def keeps_going(options) -> bool:
    """Whether the frontend is asked (``ConvertOptions.keep_going``) to convert what it can and
    return the model with ``model.refused`` set (and a stand-in per source node not
    converted), instead of raising UnsupportedOpError; the pipeline then judges the rest and
    raises one error listing every refusal of every stage."""
    return bool(options.keep_going)


def leave_stand_in(graph: Graph, name: str, op: str, inputs: Iterable[Value | None]) -> None:
    """An UNCONVERTED node for source node ``name`` that was not converted, reading the values
    it read that exist (so the passes still judge what computes them)."""
    graph.make_node(op, [v for v in inputs if v is not None], name=name, domain=UNCONVERTED)


PerName = Any  # one value for every name of a registration, or a dict name -> value


class Declaration(NamedTuple):
    """What a source op may become: the core ops its converter emits for a node computing on
    run-time data (the forms that convert, when a configuration is refused), and, when the
    core ops' own declarations do not say it all, ``converts`` ("always": the converter
    guarantees their conditions; "folded": the result depends on static shapes or constants
    only; "never": ``condition`` is why) or a ``condition`` of the converter's own (the op then
    converts only when it holds)."""

    emits: tuple[str, ...]
    converts: str | None = None
    condition: str = ""


@dataclass
class Converter:
    names: tuple[str, ...]
    fn: Callable
    doc: str = ""
    declarations: dict[str, Declaration] = field(default_factory=dict)
    # check(node) -> the reason this node's configuration has no exact form, or None; run by
    # the up-front scan before anything is converted
    check: Callable | None = None


def _for(name: str, value: PerName, default: Any = None) -> Any:
    if isinstance(value, dict):
        return value.get(name, default)
    return default if value is None else value


class OpRegistry:
    """Source-op converters of one framework; one converter may serve several op names."""

    def __init__(self, framework: str):
        self.framework = framework
        self._by_name: dict[str, Converter] = {}

    def register(self, *names: str, emits: PerName = None, converts: PerName = None,
                 condition: PerName = None, doc: str = "", check: Callable | None = None
                 ) -> Callable[[Callable], Callable]:
        """Register ``fn`` for ``names``, with each name's Declaration (``emits``,
        ``converts``, ``condition``: one value for all names, or a dict by name) and an
        up-front ``check`` of a node's configuration (see ``Converter.check``)."""
        def deco(fn: Callable) -> Callable:
            conv = Converter(tuple(names), fn, doc or (fn.__doc__ or "").strip().split("\n")[0],
                             check=check)
            for name in names:
                if name in self._by_name:
                    raise ValueError(
                        f"{self.framework} op '{name}' is registered twice "
                        f"({self._by_name[name].fn.__name__} and {fn.__name__})"
                    )
                self._by_name[name] = conv
                emitted = _for(name, emits)
                if emitted is not None:
                    conv.declarations[name] = Declaration(
                        tuple(emitted), _for(name, converts), _for(name, condition, ""))
            return fn

        return deco

    def declaration(self, name: str) -> Declaration | None:
        conv = self._by_name.get(name)
        return None if conv is None else conv.declarations.get(name)

    def get(self, name: str) -> Converter | None:
        return self._by_name.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def describe(self) -> list[tuple[str, str]]:
        """(op name, one-line description) for docs and ``nhwc-onnx ops --framework``."""
        return [(n, self._by_name[n].doc) for n in self.names()]

    def checked(self, nodes: Iterable[N], describe: Callable[[N], tuple[str, str]]
                ) -> list[NodeProblem]:
        """One problem per node whose converter's check finds no exact form for it."""
        problems = []
        for node in nodes:
            name, op = describe(node)
            conv = self._by_name.get(op)
            reason = conv.check(node) if conv is not None and conv.check is not None else None
            if reason:
                problems.append(NodeProblem(name, op, reason))
        return problems

    def unsupported(self, items: Iterable[tuple[str, str]]) -> list[NodeProblem]:
        """One problem per (node name, op) without a converter."""
        return [
            NodeProblem(name, op, f"no {self.framework} converter for op '{op}'")
            for name, op in items
            if op not in self._by_name
        ]


# Project errors whose message is one string: the loop can put the node in front of it.
_PLAIN_MESSAGE = (InvalidModelError, InvalidAttributeError, ModelLoadError)


def convert_nodes(
    nodes: Iterable[N],
    registry: OpRegistry,
    framework: str,
    describe: Callable[[N], tuple[str, str]],
    convert: Callable[[Converter, N], NodeContext | None],
    *,
    blocked: Callable[[N], bool] | None = None,
    not_converted: Callable[[N], None] | None = None,
    problems: Iterable[NodeProblem] = (),
    keep_going: Graph | None = None,
    convert_blocked: Callable[[Converter, N], NodeContext | None] | None = None,
) -> list[NodeProblem]:
    """Convert ``nodes`` in order; raise one UnsupportedOpError listing every node that has no
    exact form (``problems`` found earlier by the frontend come first).

    ``describe(node)`` gives (name, op); ``convert(converter, node)`` builds the converter's
    context, calls ``converter.fn(ctx, node)`` and returns the context (its attributes read
    are then checked). A node for which ``blocked(node)`` is true
    reads a value a failed node should have made: skipped without a second message.
    ``not_converted(node)`` hears of every node skipped or refused.

    ``keep_going`` (the graph being built): nothing is raised for refusals; the nodes a refused
    converter emitted before refusing are taken out of the graph again, and the problems are
    returned (in model order). With it, ``convert_blocked(converter, node)`` converts a blocked
    node all the same, on stand-in values for what it cannot read, so that the passes judge its
    core ops as they judge the others (an op with no dialect form is listed however far after a
    refusal it comes); when that fails the node is skipped without a message, as it would be.
    """
    nodes = list(nodes)
    found = list(problems)
    missing = {(p.node, p.op) for p in found}
    found += [p for p in registry.unsupported(describe(n) for n in nodes)
              if (p.node, p.op) not in missing]
    missing |= {(p.node, p.op) for p in found}
    for node in nodes:
        name, op = describe(node)
        if (name, op) in missing:
            if not_converted is not None:
                not_converted(node)
            continue
        converter = registry.get(op)
        assert converter is not None  # an op without one is in missing (unsupported)
        if blocked is not None and blocked(node):
            if not _converted_blocked(keep_going, convert_blocked, converter, node) \
                    and not_converted is not None:
                not_converted(node)
            continue
        emitted = len(keep_going) if keep_going is not None else 0
        try:
            _check_read(convert(converter, node))
        except Refusal as refusal:
            found.append(NodeProblem(name, op, refusal.reason))
            _take_out(keep_going, emitted)
        except UnsupportedOpError as exc:
            found.extend(exc.problems)
            _take_out(keep_going, emitted)
        except NhwcOnnxError as exc:
            named = _locate(exc, ConversionContext(name, op, framework))
            if named is exc:
                raise
            raise named from exc
        except Exception as exc:  # our converter failed on input it should have checked
            where = ConversionContext(name, op, framework)
            bug = ConversionBugError(f"internal error in nhwc-onnx {where.describe()}: "
                                     f"{type(exc).__name__}: {exc}")
            bug.where = where
            raise bug from exc
        else:
            continue
        if not_converted is not None:
            not_converted(node)
    found = sort_problems(found, nodes, describe) if found else []
    if found and keep_going is None:
        raise UnsupportedOpError(found, framework)
    return found


def _converted_blocked(graph: Graph | None, convert_blocked, converter: Converter,
                       node) -> bool:
    """Whether a node downstream of a refusal was converted on stand-in values (only when
    keeping going). Any failure there is a consequence of the refusal: nothing is kept."""
    if graph is None or convert_blocked is None:
        return False
    emitted = len(graph)
    try:
        _check_read(convert_blocked(converter, node))
    except Exception:  # noqa: BLE001 - it reads what a refused node should have made
        _take_out(graph, emitted)
        return False
    return True


def _take_out(graph: Graph | None, count: int) -> None:
    """Remove the nodes added to ``graph`` after its first ``count`` (a refused converter's)."""
    if graph is None:
        return
    for node in reversed(graph.nodes[count:]):
        graph.remove_node(node)


def sort_problems(problems: Iterable[NodeProblem], nodes: Iterable[N],
                  describe: Callable[[N], tuple[str, str]]) -> list[NodeProblem]:
    """Problems in model order; those not about a node (graph inputs ...) first."""
    position = {describe(node): i for i, node in enumerate(nodes)}
    return sorted(problems, key=lambda p: position.get((p.node, p.op), -1))


def _check_read(ctx: NodeContext | None) -> None:
    """Refuse the node just converted when its converter left an attribute with an effect
    unread."""
    unread = ctx.unread_attributes() if ctx is not None else []
    if unread:
        raise unread_refusal(unread)


def _locate(exc: NhwcOnnxError, where: ConversionContext) -> NhwcOnnxError:
    """``exc`` carrying the node being converted. One carrying a node already names it; a
    one-string error comes again with the node in front of its message; any other error gets
    the node attached, its message unchanged."""
    if exc.where is not None:
        return exc
    if type(exc) in _PLAIN_MESSAGE:
        return located(type(exc), where, str(exc))
    exc.where = where
    return exc
