"""The command-line options that set a ``ConvertOptions`` field, declared once: each option
names its field, its parser and its help; its default is the field's own default in
``ConvertOptions``, read when a command parses or shows its help (not when the command list
is made: ``--help`` loads no conversion machinery), so neither the defaults nor the fields are
repeated.

``source_options`` are the options of every command that reads a source model (convert,
verify, info's conversion); ``output_options`` the ones only ``convert`` takes. The commands
build the record with ``options_from(params)``, which takes each declared option out of the
parsed parameters.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from .. import frameworks
from .common import AT_LEAST_ONE, parse_channel_values, parse_renames, parse_shapes

if TYPE_CHECKING:
    from ..options import ConvertOptions


class FieldOption(click.Option):
    """An option whose default is its ConvertOptions field's own."""

    def __init__(self, decls, *, field: str, **attrs):
        super().__init__(decls, **attrs)
        self.field = field

    def get_default(self, ctx, call: bool = True):
        from ..options import ConvertOptions

        return getattr(ConvertOptions(), self.field)


class Flag(NamedTuple):
    """One option: its declarations, the ConvertOptions field it sets and how its parsed value
    becomes the field's (``to_field``); ``default`` True gives it the field's default."""

    decls: tuple[str, ...]
    field: str
    help: str
    to_field: Callable[[Any], Any] | None = None
    default: bool = False
    click: dict[str, Any] = {}

    @property
    def param(self) -> str:
        """The parameter name click gives the parsed value."""
        named = [d for d in self.decls if not d.startswith("-")]
        return named[0] if named else self.decls[0].lstrip("-").replace("-", "_")

    def option(self):
        if self.default:
            return click.option(*self.decls, help=self.help, cls=FieldOption, field=self.field,
                                show_default=True, **self.click)
        return click.option(*self.decls, help=self.help, **self.click)


def _names(values: tuple[str, ...]) -> str:
    return ",".join(values)


SOURCE_FLAGS = (
    Flag(("--framework",), "framework", "Source framework (default: from the file extension).",
         click={"type": click.Choice(frameworks.names())}),
    Flag(("--weights",), "weights", "Caffe: the .caffemodel, or 'random' for seeded random "
         "weights (to check convertibility without weights).", click={"metavar": "FILE"}),
    Flag(("--seed",), "seed", "Seed for --weights random and for random verification inputs.",
         default=True, click={"type": int, "metavar": "N"}),
    Flag(("--inputs", "input_names"), "inputs", "Graph input tensor names, comma separated.",
         click={"metavar": "NAMES"}),
    Flag(("--outputs", "output_names"), "outputs", "Graph output tensor names, comma "
         "separated.", click={"metavar": "NAMES"}),
    Flag(("--input-shape", "input_shapes"), "input_shapes", "An input's whole shape, in the "
         "source layout (repeatable); D1 = -1 keeps its batch symbolic.", parse_shapes,
         click={"multiple": True, "metavar": "NAME=D1,D2,..."}),
    Flag(("--batch",), "batch", "Set axis 0 (the batch) of every graph input to N. Without it "
         "a symbolic batch stays symbolic and a fixed one stays fixed.",
         click={"type": AT_LEAST_ONE, "metavar": "N"}),
    Flag(("--signature",), "signature", "TensorFlow SavedModel signature.", default=True,
         click={"metavar": "NAME"}),
)

OUTPUT_FLAGS = (
    Flag(("--domain",), "domain", "Operator-set domain of dialect ops ('default' = '').",
         default=True, click={"type": click.Choice(["nhwc", "default"])}),
    Flag(("--weights-as-constants",), "weights_as_constants", "Weights as Constant nodes.",
         click={"is_flag": True}),
    Flag(("--allow-transpose",), "allow_transpose", "Insert a layout Transpose where NCHW "
         "semantics need one (warns per node).", click={"is_flag": True}),
    Flag(("--strict",), "strict", "Refuse rounding-level rewrites too (x/c as x*(1/c), ...): "
         "bit-exact only.", click={"is_flag": True}),
    Flag(("--keep-layout",), "keep_layout", "Keep these graph inputs/outputs in the source's "
         "axis order (not NHWC).", _names, click={"multiple": True, "metavar": "NAME[,NAME]"}),
    Flag(("--rename",), "rename", "Rename a graph input or output (repeatable).", parse_renames,
         click={"multiple": True, "metavar": "OLD=NEW"}),
    Flag(("--mean",), "mean", "Embed x - mean in the image input (one value or one per "
         "channel, in the source's channel order); NAME= when the model has several.",
         lambda v: parse_channel_values(v, "--mean"),
         click={"multiple": True, "metavar": "[NAME=]V[,V...]"}),
    Flag(("--std",), "std", "Embed division by std in the image input (after --mean); with "
         "--strict only powers of two.", lambda v: parse_channel_values(v, "--std"),
         click={"multiple": True, "metavar": "[NAME=]V[,V...]"}),
    Flag(("--reverse-channels",), "reverse_channels", "Embed a reversal of the image input's "
         "channels (RGB <-> BGR), before --mean; =NAME when the model has several image "
         "inputs.", click={"multiple": True, "is_flag": False, "flag_value": "",
                           "metavar": "[=NAME]"}),
    Flag(("--no-cut",), "exact_cut", "On a refusal, only list the refused nodes: no exact cut "
         "(which costs up to one more conversion of the convertible part).", lambda v: not v,
         click={"is_flag": True}),
)


def _decorator(flags: tuple[Flag, ...]):
    def decorate(command):
        for flag in reversed(flags):
            command = flag.option()(command)
        return command
    return decorate


source_options = _decorator(SOURCE_FLAGS)
output_options = _decorator(OUTPUT_FLAGS)


def parameter_of_field(field: str) -> str:
    """The command's parameter that sets ConvertOptions' ``field`` (``field`` itself when none
    does), so that a library error names the option the user typed."""
    return next((f.param for f in (*SOURCE_FLAGS, *OUTPUT_FLAGS) if f.field == field), field)


def options_from(params: dict[str, Any]) -> ConvertOptions:
    """The ConvertOptions of the declared options among ``params`` (each taken out of it)."""
    from ..options import ConvertOptions

    fields = {}
    for flag in (*SOURCE_FLAGS, *OUTPUT_FLAGS):
        if flag.param in params:
            value = params.pop(flag.param)
            fields[flag.field] = flag.to_field(value) if flag.to_field else value
    return ConvertOptions(**fields)
