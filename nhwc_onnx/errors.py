"""The project's error hierarchy.

The library raises these; only the command line (``nhwc_onnx.cli``) turns them into messages
and exit codes.
Each class mixes in the builtin it resembles so callers can catch either.
"""
from __future__ import annotations

from collections import namedtuple
from typing import TypeVar

# Exit codes used by the command line (documented in the README).
EXIT_OK = 0
EXIT_INVALID = 1  # invalid model, unsupported op, refused conversion
EXIT_UNREADABLE = 2  # input cannot be read / parsed / is not the format it claims
EXIT_VERIFY_FAILED = 3  # converted model computes different numbers
EXIT_USAGE = 2  # a mistake in the command line: the code of unreadable input, as argparse's


class NhwcOnnxError(Exception):
    """Base class of every error the project raises on purpose."""

    exit_code = EXIT_INVALID
    # The source node being converted when the error was raised (a ConversionContext), set by
    # the frontends' conversion loop or by the node's context; its message then names it.
    where: ConversionContext | None = None


class ModelLoadError(NhwcOnnxError, ValueError):
    """A source or dialect file cannot be read: missing, truncated, foreign, malformed."""

    exit_code = EXIT_UNREADABLE


class InvalidAttributeError(NhwcOnnxError, ValueError):
    """A source node carries an attribute value the converter cannot honour."""


class InvalidModelError(NhwcOnnxError, ValueError):
    """A source model is structurally broken: cycles, dangling inputs, bad shapes."""


class OutputPathError(NhwcOnnxError, ValueError):
    """The requested output location is unsafe or impossible (e.g. equal to the input)."""


class MissingDependencyError(NhwcOnnxError, ImportError):
    """An optional runtime (tensorflow, onnxruntime, opencv) is needed but not installed."""

    def __init__(self, package: str, extra: str, purpose: str):
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs '{package}', which is not installed; "
            f"install it with: pip install 'nhwc-onnx[{extra}]'"
        )


# The records below are named tuples, not dataclasses: importing dataclasses (and the inspect
# module it loads) was 42 M instructions, a fifth of a `check` and over a quarter of `--help`.
class NodeProblem(namedtuple("NodeProblem", "node op reason rule", defaults=("",))):
    """One reason why one node cannot be converted or is invalid."""

    __slots__ = ()

    def __str__(self) -> str:
        rule = f" [{self.rule}]" if self.rule else ""
        return f"node '{self.node}' ({self.op}){rule}: {self.reason}"


class UnsupportedOpError(NhwcOnnxError, NotImplementedError):
    """Nodes that have no exact dialect equivalent. Carries every offending node at once."""

    # Set on some refusals only (read with getattr): the graph inputs --keep-layout would
    # let convert (passes.to_nhwc), and the checked exact cut (a conversion.cut.ExactCut).
    keep_layout_suggestion: list[str]
    exact_cut: object

    def __init__(self, problems: list[NodeProblem], framework: str = "", hint: str = ""):
        self.problems = list(problems)
        self.hint = hint
        self.framework = framework
        ops: dict[str, int] = {}
        for p in self.problems:
            ops[p.op] = ops.get(p.op, 0) + 1
        summary = ", ".join(f"{op} x{n}" for op, n in sorted(ops.items()))
        where = f" {framework}" if framework else ""
        lines = [f"cannot convert {len(self.problems)}{where} node(s) exactly ({summary}):"]
        lines += [f"  - {p}" for p in self.problems]
        if hint:
            lines.append(f"hint: {hint}")
        super().__init__("\n".join(lines))

    @classmethod
    def merged(cls, errors: list[UnsupportedOpError], framework: str = "") -> UnsupportedOpError:
        """One error listing the problems of ``errors`` in order, each node once. It keeps the
        framework label when one error (or errors of one label) says everything, and joins
        the hints."""
        seen: set[tuple[str, str]] = set()
        problems, labels = [], []
        for error in errors:
            fresh = [p for p in error.problems if (p.node, p.op) not in seen]
            seen.update((p.node, p.op) for p in fresh)
            problems += fresh
            if fresh:
                labels.append(error.framework)
        label = labels[0] if len(set(labels)) == 1 else framework
        hint = "; ".join(dict.fromkeys(e.hint for e in errors if e.hint))
        result = cls(problems, label, hint)
        suggestion = [n for e in errors for n in getattr(e, "keep_layout_suggestion", ())]
        if suggestion:
            result.keep_layout_suggestion = list(dict.fromkeys(suggestion))
        return result


class ValidationIssue(namedtuple("ValidationIssue", "node op rule message expected found",
                                 defaults=("", ""))):
    """One rule of the dialect that a model breaks."""

    __slots__ = ()

    def __str__(self) -> str:
        extra = ""
        if self.expected or self.found:
            extra = f" (expected {self.expected or '-'}, found {self.found or '-'})"
        where = f"node '{self.node}' ({self.op})" if self.node else "graph"
        return f"{where} [{self.rule}]: {self.message}{extra}"

    def to_dict(self) -> dict:
        return {
            "node": self.node,
            "op": self.op,
            "rule": self.rule,
            "message": self.message,
            "expected": self.expected,
            "found": self.found,
        }


class SchemaValidationError(NhwcOnnxError, ValueError):
    """A model breaks dialect rules. Carries every issue found, not just the first."""

    def __init__(self, issues: list[ValidationIssue], context: str = ""):
        self.issues = list(issues)
        head = f"{context}: " if context else ""
        lines = [f"{head}{len(self.issues)} dialect rule violation(s):"]
        lines += [f"  - {i}" for i in self.issues]
        super().__init__("\n".join(lines))


class ConversionBugError(NhwcOnnxError, RuntimeError):
    """The pipeline produced something invalid: a bug in nhwc-onnx, not in the user's model."""


class SourceRuntimeError(ModelLoadError):
    """The source's own runtime (TensorFlow, onnxruntime, OpenCV) cannot run the source as it
    was converted, so there is nothing to verify against (exit 2, like a missing runtime)."""


class VerificationError(NhwcOnnxError, AssertionError):
    """The converted model's outputs differ from the source model's beyond tolerance."""

    exit_code = EXIT_VERIFY_FAILED


class ConversionContext(namedtuple("ConversionContext", "node op framework",
                                   defaults=("", "", ""))):
    """Where an error happened, for messages like: while converting node 'conv1' (Convolution).
    The frontends' conversion loop (frontends/base.py) adds it to the errors it passes on."""

    __slots__ = ()

    def describe(self) -> str:
        fw = f", {self.framework}" if self.framework else ""
        return f"while converting node '{self.node}' ({self.op}{fw})"

    def label(self) -> str:
        """The node as a message names it: ``node 'conv1' (Conv)``; Caffe says layer."""
        kind = "layer" if self.framework == "caffe" else "node"
        return f"{kind} '{self.node}' ({self.op})"


E = TypeVar("E", bound=NhwcOnnxError)


def located(error_type: type[E], where: ConversionContext, message: str) -> E:
    """An error about source node ``where``: its message starts with the node, and it carries
    it (so the conversion loop neither searches the text nor names the node twice)."""
    error = error_type(f"{where.label()}: {message}")
    error.where = where
    return error


class UsageError(NhwcOnnxError, ValueError):
    """A value the user gave that cannot be used: malformed (``--input x``), naming something
    the model does not have (``--keep-layout NAME``), or feeds that do not fit the model."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, param_hint: str = ""):
        self.problem = message  # the message without the parameter
        self.param_hint = param_hint  # the parameter (or command-line option) at fault
        super().__init__(f"Invalid value for '{param_hint}': {message}" if param_hint
                         else message)
