"""What the command line's parts share: the command table, parsing, value types and printing.

The parsing is the standard library's ``argparse``: importing click had been 11% of the
instructions of a ``check`` and 26% of ``--help`` (303 -> 271 M and 218 -> 161 M without it).

A command is a function ``run(settings, args)`` whose docstring is its help and a function
``add_arguments(parser)`` that declares its options; ``cli.py`` lists them in ``COMMANDS``.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from .errors import EXIT_USAGE  # a value found wrong while a command runs: errors.UsageError


class Command:
    """One subcommand: ``run(settings, args)`` (its docstring is the help) and
    ``add_arguments(parser)`` (its options)."""

    __slots__ = ("add_arguments", "name", "run")

    def __init__(self, name: str, add_arguments: Callable[[argparse.ArgumentParser], None],
                 run: Callable[..., object]):
        self.name = name
        self.add_arguments = add_arguments
        self.run = run

    @property
    def summary(self) -> str:
        return self.description.split("\n", 1)[0]

    @property
    def description(self) -> str:
        """The docstring without its indentation (``inspect.cleandoc`` would import inspect)."""
        first, _, rest = (self.run.__doc__ or "").strip().partition("\n")
        lines = rest.splitlines()
        indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
        return "\n".join([first.strip(), *(x[indent:] for x in lines)])


class Parser(argparse.ArgumentParser):
    """argparse's parser, reporting a mistake the way every other error is reported: the usage
    line, where to find help, then one ``Error:`` line; exit 2."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.command_parsers: dict[str, Parser] = {}  # filled by whoever adds the commands

    def error(self, message: str):
        self.exit(EXIT_USAGE, usage_error_text(self, message))

    def parse_command_line(self, args: list[str]) -> argparse.Namespace:
        """``parse_args``, except that an argument no one declares is reported with the usage
        of the command it was given to (argparse reports it with the top level's)."""
        parsed, unknown = self.parse_known_args(args)
        if unknown:
            owner = self.command_parsers.get(getattr(parsed, "command", None), self)
            owner.error(f"unrecognized arguments: {' '.join(unknown)}")
        return parsed


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the docstrings' paragraphs and says each option's default where it has one.
    The terminal width is read once (argparse reads it through shutil for every option)."""

    def __init__(self, prog: str, **kwargs):
        kwargs.setdefault("width", _terminal_columns() - 2)
        super().__init__(prog, **kwargs)

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default  # 0 is a default worth saying (--seed), False and [] are not
        if default is not None and default is not False and default != [] \
                and default is not argparse.SUPPRESS and action.option_strings \
                and action.nargs != 0 and "%(default)" not in text:
            text += "  [default: %(default)s]"
        return text


_COLUMNS: list[int] = []


def _terminal_columns() -> int:
    """$COLUMNS, else the width of the terminal on stdout, else 80 (as shutil decides)."""
    if not _COLUMNS:
        try:
            columns = int(os.environ.get("COLUMNS", "0"))
        except ValueError:
            columns = 0
        if columns <= 0:
            try:
                columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
            except (AttributeError, ValueError, OSError):
                columns = 0
        _COLUMNS.append(columns or 80)
    return _COLUMNS[0]


def new_parser(**kwargs) -> Parser:
    return Parser(formatter_class=_Formatter, allow_abbrev=False, **kwargs)


def closest_name(name: str, names) -> str | None:
    """The one of ``names`` that ``name`` was probably meant to be (same letters in another
    case first, then a close spelling), or None."""
    names = list(names)
    same_letters = [n for n in names if n.lower() == name.lower()]
    if same_letters:
        return same_letters[0]
    import difflib  # only on a mistake

    close = difflib.get_close_matches(name, names, n=1)
    return close[0] if close else None


def no_such_command(name: str, commands) -> str:
    """The error for a command name that does not exist, with the closest one if any is close."""
    names = sorted(commands)
    close = closest_name(name, names)
    hint = f" Did you mean '{close}'?" if close else ""
    return f"no such command '{name}'.{hint} Commands: {', '.join(names)}."


def unknown_names(given: list[str], known, what: str) -> str:
    """The error for names not among ``known``: each with its likely meaning, then the list."""
    known = list(known)
    named = []
    for name in given:
        close = closest_name(name, known)
        named.append(f"{name} (did you mean {close}?)" if close else name)
    return f"not {what}: {', '.join(named)} (known: {', '.join(known)})"


def usage_error_text(parser: argparse.ArgumentParser, message: str) -> str:
    return (f"{parser.format_usage().rstrip()}\nTry '{parser.prog} -h' for help.\n\n"
            f"Error: {message}\n")


def echo(message: str = "", err: bool = False) -> None:
    """Print one line and flush it, so stdout and stderr keep their order when both go to one
    pipe; nothing when the stream is closed (started with that descriptor closed)."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    stream.write(f"{message}\n")
    stream.flush()


def int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is not in the range x>={minimum}")
        return value

    parse.__name__ = "integer"
    return parse


def non_negative_float(text: str) -> float:
    """A number >= 0 (a tolerance): not negative, not NaN."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"{text} is not a number >= 0")
    return value


def path_arg(*, file_okay: bool = True, dir_okay: bool = True) -> Callable[[str], str]:
    """A path, refused early only when it exists and is the wrong kind (the commands make
    every other check themselves, before any work)."""
    def parse(text: str) -> str:
        if not dir_okay and os.path.isdir(text):
            raise argparse.ArgumentTypeError(f"'{text}' is a directory")
        if not file_okay and os.path.exists(text) and not os.path.isdir(text):
            raise argparse.ArgumentTypeError(f"'{text}' is a file, not a folder")
        return text

    parse.__name__ = "path"
    return parse


def add_flag(parser: argparse.ArgumentParser, *names: str, help: str, dest: str | None = None):
    extra = {"dest": dest} if dest else {}
    parser.add_argument(*names, action="store_true", help=help, **extra)


def repeated(parser: argparse.ArgumentParser, *names: str, dest: str, metavar: str, help: str):
    """An option that may be given several times; its values in order (a list)."""
    parser.add_argument(*names, dest=dest, metavar=metavar, action="append", default=[],
                        help=help)
