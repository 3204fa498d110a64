"""``validate(model)``: every dialect rule over the whole graph, all problems at once."""
from __future__ import annotations

from ..errors import InvalidModelError, ValidationIssue
from ..ir import DIALECT, Graph, Model, Node
from .base import DIALECT_OPS, InferContext, Registry, RuleError, check_attr_value


def validate(model: Model | Graph, registry: Registry = DIALECT_OPS) -> list[ValidationIssue]:
    """Return every rule the model breaks (empty list: valid). Never raises on bad models."""
    graph = model.graph if isinstance(model, Model) else model
    issues: list[ValidationIssue] = list(model.load_issues) if isinstance(model, Model) else []
    issues += _check_names(graph)
    for node, idx, v in graph.dangling_inputs():
        issues.append(
            ValidationIssue(
                node.name, node.op, "dangling-input",
                f"input {idx} '{v.name}' is not a graph input, a constant or any node's output",
            )
        )
    order = _ordered_nodes(graph, issues)
    for v in graph.inputs:
        if v.dtype != "float32":
            issues.append(
                ValidationIssue("", "", "dtype", f"graph input '{v.name}' must be float32",
                                "float32", v.dtype)
            )
    inferred = _infer(graph, order, registry, issues)
    for v in graph.outputs:
        got = inferred.get(id(v), v.shape if v.is_const else None)
        if v.shape is not None and got is not None and _disagree(v.shape, got):
            issues.append(
                ValidationIssue(
                    "", "", "output-shape",
                    f"graph output '{v.name}' is declared with a shape that inference "
                    "disagrees with",
                    _fmt(got), _fmt(v.shape),
                )
            )
        if v.producer() is None and not v.is_const and v not in graph.inputs:
            issues.append(
                ValidationIssue("", "", "dangling-output",
                                f"graph output '{v.name}' has no producer")
            )
    return issues


def infer_shapes(model: Model | Graph, registry: Registry = DIALECT_OPS) -> dict[str, tuple]:
    """Shapes of every value by name, as the dialect's shape inference computes them."""
    graph = model.graph if isinstance(model, Model) else model
    issues: list[ValidationIssue] = []
    inferred = _infer(graph, _ordered_nodes(graph, issues), registry, issues)
    out = {}
    for v in graph.values():
        shape = v.shape if v.is_const else inferred.get(id(v))
        if shape is not None:
            out[v.name] = tuple(shape)
    return out


def _infer(graph: Graph, order: list[Node], registry: Registry,
           issues: list[ValidationIssue]) -> dict[int, tuple | None]:
    """Every node checked, every value's shape inferred (value id -> shape); a graph whose
    inputs name their batch is inferred symbolically (``schemas.batch``)."""
    if any(isinstance(d, str) for v in graph.inputs for d in v.shape or ()):
        return _infer_symbolic(graph, order, registry, issues)
    inferred: dict[int, tuple | None] = {id(v): v.shape for v in graph.inputs}
    for node in order:
        issues += _check_node(node, registry, inferred)
    return inferred


def _infer_symbolic(graph: Graph, order: list[Node], registry: Registry,
                    issues: list[ValidationIssue]) -> dict[int, tuple | None]:
    """Infer at the two probe sizes of the batch and merge: a dimension that follows the
    probe at axis 0 is the batch, any other difference (or an op that addresses axis 0)
    mixes samples and is an issue of its node."""
    from .symbolic_batch import PROBES, at_probe, describe_difference, merged_shape, mixes_samples

    names = []
    for v in graph.inputs:
        for axis, d in enumerate(v.shape or ()):
            if not isinstance(d, str):
                continue
            if axis:
                issues.append(ValidationIssue(
                    "", "", "symbolic-dim", f"graph input '{v.name}' names dimension {axis} "
                    f"'{d}': only the batch (axis 0) may be symbolic", "a size", d))
            elif d not in names:
                names.append(d)
    if len(names) > 1:
        issues.append(ValidationIssue(
            "", "", "symbolic-dim", f"graph inputs name the batch differently ({names}); a "
            "model has one batch", names[0], ", ".join(names)))
    symbol = names[0] if names else None
    runs = []
    seen = set()
    for size in PROBES:
        inferred = {id(v): at_probe(v.shape, size) for v in graph.inputs}
        for node in order:
            for issue in _check_node(node, registry, inferred):
                if (issue.node, issue.rule) not in seen:  # once, whichever size shows it
                    seen.add((issue.node, issue.rule))
                    issues.append(issue)
        runs.append(inferred)
    merged: dict[int, tuple | None] = {id(v): v.shape for v in graph.inputs}
    tainted: set[int] = set()  # values after a node that mixes samples: not checked again
    for node in order:
        ins = [v for v in node.inputs if v is not None]
        if any(id(v) in tainted for v in ins):
            tainted.update(id(out) for out in node.outputs)
            continue
        carried = {i for i, v in enumerate(node.inputs)
                   if v is not None and not v.is_const and _carries(merged.get(id(v)), symbol)}
        why = mixes_samples(node, carried) if carried else None
        shapes = []
        for out in node.outputs:
            first, second = runs[0].get(id(out)), runs[1].get(id(out))
            shape = merged_shape(first, second, symbol) if symbol is not None else first
            if first is not None and second is not None and why is None:
                if shape is None:
                    why = (f"mixes the batch with other axes: output '{out.name}' is "
                           f"{describe_difference(first, second, symbol or 'N')}")
                elif carried and (not shape or shape[0] != symbol):
                    why = (f"output '{out.name}' does not carry the batch at axis 0 (it is "
                           f"{describe_difference(first, second, symbol or 'N')})")
            shapes.append(shape)
        if why is not None:
            issues.append(ValidationIssue(node.name, node.op, "batch", why))
            tainted.update(id(out) for out in node.outputs)
            shapes = [None] * len(node.outputs)
        for out, shape in zip(node.outputs, shapes):
            merged[id(out)] = shape
    return merged


def _carries(shape, symbol: str | None) -> bool:
    return symbol is not None and bool(shape) and shape[0] == symbol


def _disagree(declared, inferred) -> bool:
    """Rank differs, or a dimension known on both sides differs (None is unknown)."""
    if len(declared) != len(inferred):
        return True
    return any(a is not None and b is not None and a != b for a, b in zip(declared, inferred))


def _fmt(shape) -> str:
    return "(" + ",".join("?" if d is None else str(d) for d in shape) + ")"


def _check_names(graph: Graph) -> list[ValidationIssue]:
    issues = []
    seen: dict[str, int] = {}
    for v in graph.values():
        seen[v.name] = seen.get(v.name, 0) + 1
    for name, count in seen.items():
        if count > 1:
            issues.append(
                ValidationIssue("", "", "duplicate-name",
                                f"{count} different tensors are named '{name}'")
            )
    node_names: dict[str, int] = {}
    for n in graph.nodes:
        if n.name:
            node_names[n.name] = node_names.get(n.name, 0) + 1
    for name, count in node_names.items():
        if count > 1:
            issues.append(
                ValidationIssue(name, "", "duplicate-node-name",
                                f"{count} nodes are named '{name}'")
            )
    return issues


def _ordered_nodes(graph: Graph, issues: list[ValidationIssue]) -> list[Node]:
    try:
        graph.toposort()
    except InvalidModelError as exc:
        issues.append(ValidationIssue("", "", "cycle", str(exc)))
        return [n for n in graph.nodes]
    return graph.nodes


def _check_node(node: Node, registry: Registry, inferred: dict) -> list[ValidationIssue]:
    """Every rule of the node's schema (op, ports, attributes), then its output shapes into
    ``inferred`` (value id -> shape; None where it cannot be known)."""
    issues: list[ValidationIssue] = []

    def add(rule: str, message: str, expected="", found="") -> None:
        issues.append(ValidationIssue(node.name, node.op, rule, message, str(expected), str(found)))

    if node.domain not in (registry.domain, "") or node.op not in registry:
        where = f"{node.domain}." if node.domain else ""
        add("unknown-op", f"op '{where}{node.op}' is not in the {registry.domain} dialect")
        return issues
    schema = registry[node.op]
    if not _check_ports(node, schema, add):
        return issues
    _check_attributes(node, schema, add)
    if issues or schema.infer is None:
        return issues
    _infer_node(node, schema, inferred, add)
    return issues


def _check_ports(node: Node, schema, add) -> bool:
    """Arity and element types of inputs and outputs; False when the input count is wrong
    (nothing else about the node can be read then)."""
    n_in = len(node.inputs)
    while n_in and node.inputs[n_in - 1] is None:
        n_in -= 1
    if n_in < schema.min_inputs or (schema.max_inputs is not None and n_in > schema.max_inputs):
        hi = "inf" if schema.max_inputs is None else schema.max_inputs
        expected = (str(schema.min_inputs) if hi == schema.min_inputs
                    else f"{schema.min_inputs}..{hi}")
        add("arity", "wrong number of inputs", expected, n_in)
        return False
    for idx in range(n_in):
        port = schema.port(idx)
        v = node.inputs[idx]
        if v is None:
            if not port.optional:
                add("arity", f"required input '{port.name}' is missing")
            continue
        if v.dtype not in port.dtypes:
            add("dtype", f"input '{port.name}' ('{v.name}') has the wrong element type",
                "/".join(port.dtypes), v.dtype)
        if port.constant and not v.is_const:
            add("constant-input",
                f"input '{port.name}' ('{v.name}') must be a constant initializer")
    n_out = len(node.outputs)
    variadic = bool(schema.outputs) and schema.outputs[-1].variadic  # core Split: one or more
    if n_out != len(schema.outputs) and not (variadic and n_out >= len(schema.outputs)):
        add("arity", "wrong number of outputs", len(schema.outputs), n_out)
    for idx, out in enumerate(node.outputs):
        port = schema.outputs[min(idx, len(schema.outputs) - 1)] if schema.outputs else None
        allowed = port.dtypes if port is not None else ("float32",)
        if out.dtype is not None and out.dtype not in allowed:
            add("dtype", f"output '{out.name}' has the wrong element type",
                "/".join(allowed), out.dtype)
    return True


def _check_attributes(node: Node, schema, add) -> None:
    for name, value in node.attrs.items():
        spec = schema.attrs.get(name)
        if spec is None:
            known = ", ".join(schema.attrs) or "none"
            add("unknown-attribute",
                f"attribute '{name}' is not defined for {node.op} (known: {known})")
            continue
        why = check_attr_value(name, spec, value)
        if why:
            add("attribute", why)
    for name, spec in schema.attrs.items():
        if spec.required and name not in node.attrs:
            add("missing-attribute", f"required attribute '{name}' is missing")


def _infer_node(node: Node, schema, inferred: dict, add) -> None:
    shapes: list[tuple | None] = []
    consts: list = []  # per input, its array or None
    for v in node.inputs:
        if v is None:
            shapes.append(None)
            consts.append(None)
        elif v.const is not None:
            shapes.append(tuple(v.const.shape))
            consts.append(v.const)
        else:
            shapes.append(inferred.get(id(v)))
            consts.append(None)
    if any(s is None for s, v in zip(shapes, node.inputs) if v is not None):
        for out in node.outputs:
            inferred[id(out)] = None
        return
    ctx = InferContext(node, schema.with_defaults(node.attrs), shapes, consts)
    try:
        outs = schema.infer(ctx)
    except RuleError as err:
        add(err.rule, err.message, err.expected, err.found)
        for out in node.outputs:
            inferred[id(out)] = None
        return
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError) as err:
        # Shape inference met values it cannot read: report, never crash on a bad model.
        add("shape", f"shape inference failed: {err}")
        for out in node.outputs:
            inferred[id(out)] = None
        return
    for out, shape in zip(node.outputs, outs):
        # A None dimension stays unknown (e.g. a dynamic batch size).
        shape = tuple(None if d is None else int(d) for d in shape) if shape is not None else None
        if shape is not None and any(d is not None and d < 0 for d in shape):
            add("shape", f"output '{out.name}' would have a negative dimension", "", _fmt(shape))
        inferred[id(out)] = shape


def issue_count_by_rule(issues: list[ValidationIssue]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in issues:
        counts[i.rule] = counts.get(i.rule, 0) + 1
    return counts


__all__ = ["DIALECT", "infer_shapes", "issue_count_by_rule", "validate"]
