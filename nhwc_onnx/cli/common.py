"""What the commands share: the settings of the group, printing, value types and the option
decorators of the commands that read a source model."""
from __future__ import annotations

import os
import re
import sys
from typing import TextIO

import click

from .. import frameworks


class Settings:
    """The group's own options, as every command sees them (``click.pass_obj``)."""

    __slots__ = ("debug", "verbosity")

    def __init__(self, verbosity: int = 0, debug: bool = False):
        self.verbosity = verbosity  # -1 quiet, 0 normal, 1+ verbose
        self.debug = debug


# C0 controls but newline and tab, DEL, C1 controls, and lone surrogates (undecodable bytes of
# a file name): the characters that would drive the terminal or fail to encode.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with every control character escaped as ``\\xNN`` (``\\udcNN`` for a lone
    surrogate): node and tensor names, messages and paths come from files, and a name holding
    ``ESC [2J`` must not clear the user's screen. Newlines and tabs stay."""
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def echo(message: str = "", err: bool = False) -> None:
    """Print one line (control characters escaped: ``printable``) and flush it, so stdout and
    stderr keep their order when both go to one pipe; nothing when the stream is closed
    (started with that descriptor closed). Every line the commands print goes through here."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    try:
        stream.write(f"{printable(message)}\n")
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        if err:
            raise
        raise StdoutUnwritable(exc.errno, exc.strerror) from None


class StdoutUnwritable(OSError):
    """Standard output refuses what a command prints (``> /dev/full``: no space left)."""


def wanted(quiet: bool = False, stream: TextIO | None = None) -> bool:
    """Whether progress lines are for a person: not quiet, and the stream is a terminal."""
    stream = stream or sys.stderr
    try:
        return not quiet and stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


def progress(settings: Settings, message: str) -> None:
    """A progress line, only for a person watching a terminal (never on a closed stderr)."""
    if wanted(settings.verbosity < 0):
        echo(message, err=True)


# -- value types --------------------------------------------------------------------------------


class PathType(click.ParamType):
    """A path, refused early only when it exists and is the wrong kind (the commands make every
    other check themselves, before any work)."""

    name = "path"

    def __init__(self, *, dir_okay: bool = True):
        self.dir_okay = dir_okay

    def convert(self, value, param, ctx) -> str:
        text = os.fspath(value)
        if not self.dir_okay and os.path.isdir(text):
            self.fail(f"'{text}' is a directory", param, ctx)
        return text


class NonNegativeFloat(click.ParamType):
    """A number >= 0 (a tolerance): not negative, not NaN."""

    name = "float"

    def convert(self, value, param, ctx) -> float:
        if isinstance(value, float):
            number = value
        else:
            try:
                number = float(value)
            except ValueError:
                self.fail(f"{value!r} is not a number", param, ctx)
        if not number >= 0:  # NaN fails this too
            self.fail(f"{value} is not a number >= 0", param, ctx)
        return number


FILE = PathType(dir_okay=False)  # an input file: a directory is an unreadable input (exit 2)
# Where a command writes (a file or a folder): not refused here, so that a path of the wrong
# kind is an unusable output (exit 1) like every other (nhwc_onnx.files.writes).
OUTPUT = PathType()
AT_LEAST_ONE = click.IntRange(min=1)


def names_option(*decls: str, metavar: str, help: str):
    """An option that may be given several times (a tuple of its values, in order)."""
    return click.option(*decls, multiple=True, metavar=metavar, help=help)


# -- options of the commands that read a source model -------------------------------------------


def framework_option(*, extra: tuple[str, ...] = (), help: str):
    return click.option("--framework", type=click.Choice([*frameworks.names(), *extra]),
                        help=help)


def tolerance_options(command):
    """--atol and --rtol, the same for convert --verify and verify."""
    command = click.option("--rtol", type=NonNegativeFloat(), default=1e-4, show_default=True,
                           metavar="X", help="Relative tolerance of the comparison.")(command)
    return click.option("--atol", type=NonNegativeFloat(), default=1e-4, show_default=True,
                        metavar="X", help="Absolute tolerance of the comparison.")(command)


def verification_options(command):
    """--input, --layers, --samples and --html, the same for convert --verify and verify."""
    for decorate in reversed((
        names_option("--input", "feeds", metavar="NAME=FILE.npy",
                     help="Input value in the source layout, keyed by the converted model's "
                          "input name (default: seeded random)."),
        click.option("--layers", is_flag=True,
                     help="Also compare every tensor both models compute (a table in graph "
                          "order; the first out of tolerance marked)."),
        click.option("--samples", type=AT_LEAST_ONE, default=1, show_default=True,
                     metavar="N", help="Compare on N inputs (seeded; --input files first); "
                                       "the verdict is the worst."),
        click.option("--html", "html_path", type=OUTPUT, metavar="FILE",
                     help="Write a self-contained HTML page: verdict, conversion summary, a "
                          "plot of the per-tensor error and the table (implies --layers)."),
    )):
        command = decorate(command)
    return command


def parse_input_files(items: tuple[str, ...]) -> list[tuple[str, str]]:
    """--input NAME=FILE.npy values as (name, file) pairs, in order."""
    from ..errors import UsageError

    pairs = []
    for item in items:
        name, sep, file = item.partition("=")
        if not sep:
            raise UsageError(f"'{item}': expected NAME=FILE.npy", param_hint="--input")
        pairs.append((name, file))
    return pairs


def parse_shapes(values: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """--input-shape NAME=D1,D2,... values as NAME -> dims."""
    from ..errors import UsageError

    shapes: dict[str, tuple[int, ...]] = {}
    for item in values:
        name, sep, text = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = tuple(int(d) for d in text.split(","))
        except ValueError:
            raise UsageError(f"'{item}': expected NAME=D1,D2,... (e.g. input=1,224,224,3)",
                             param_hint="--input-shape") from None
    return shapes  # the sizes are checked where every caller's are: ConvertOptions


def parse_renames(values: tuple[str, ...]) -> dict[str, str]:
    """--rename OLD=NEW values as OLD -> NEW."""
    from ..errors import UsageError

    renames: dict[str, str] = {}
    for item in values:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise UsageError(f"'{item}': expected OLD=NEW (e.g. input=image)",
                             param_hint="--rename")
        if old in renames:
            raise UsageError(f"'{old}' is renamed twice", param_hint="--rename")
        renames[old] = new
    return renames


def parse_channel_values(values: tuple[str, ...], flag: str) -> dict[str, list[float]]:
    """--mean / --std values: ``V[,V...]`` (the model's image input, key '') or
    ``NAME=V[,V...]``."""
    from ..errors import UsageError

    parsed: dict[str, list[float]] = {}
    for item in values:
        name, _, numbers = item.rpartition("=")
        try:
            parsed_values = [float(v) for v in numbers.split(",")]
        except ValueError:
            raise UsageError(f"'{item}': expected V[,V...] or NAME=V[,V...] (one value, or "
                             "one per channel, e.g. 123.68,116.78,103.94)",
                             param_hint=flag) from None
        if name in parsed:
            raise UsageError(f"'{item}': {'input ' + repr(name) if name else 'the image input'}"
                             " is given twice", param_hint=flag)
        parsed[name] = parsed_values
    return parsed
