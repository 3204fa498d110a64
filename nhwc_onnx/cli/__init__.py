"""The ``nhwc-onnx`` command line, on click: a thin shell over the library.

Only this package prints and chooses exit codes (see ``nhwc_onnx.errors``). Each group of
commands is one module (``COMMANDS``), imported when its command runs or a help text lists it;
heavy modules (onnx, the schemas, onnxruntime, the frontends) are imported inside the commands
that need them, so ``nhwc-onnx check`` starts fast and never loads TensorFlow or onnxruntime.
Options shared by several commands are declared once, in ``common``.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys

import click

from .. import __version__
from ..errors import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNREADABLE,
    EXIT_USAGE,
    MissingDependencyError,
    NhwcOnnxError,
    UsageError,
)
from ..support.spelling import closest_name
from .common import Settings, StdoutUnwritable, echo
from .process import (
    GC_YOUNG_ALLOCATIONS,
    IMPORTED_BEFORE_DISPATCH,
    NUMPY_ENVIRONMENT,
    _collect_garbage_less_often,
    _import_before_dispatch,
    _numpy_settings,
    command_name,
    exit_without_teardown,
)

__all__ = ["COMMANDS", "GC_YOUNG_ALLOCATIONS", "IMPORTED_BEFORE_DISPATCH", "NUMPY_ENVIRONMENT",
           "command_line", "command_name", "exit_without_teardown", "main", "run_command"]

PROG = "nhwc-onnx"

# command -> the module of nhwc_onnx.cli that defines it (a click command of the same name)
COMMANDS = {
    "check": "check",
    "convert": "convert",
    "info": "convert",
    "lower": "lower",
    "ops": "ops",
    "run": "run",
    "verify": "convert",
}


def get_command(name: str) -> click.Command:
    """The click command ``name`` (its module is imported on first use)."""
    return getattr(importlib.import_module(f"{__name__}.{COMMANDS[name]}"), name)


def no_such_command(name: str) -> str:
    """The error for a command name that does not exist, with the closest one if any is close."""
    names = sorted(COMMANDS)
    close = closest_name(name, names)
    hint = f" Did you mean '{close}'?" if close else ""
    return f"no such command '{name}'.{hint} Commands: {', '.join(names)}."


class Group(click.Group):
    """The commands, loaded lazily; a mistake is reported with the usage of the command it was
    given to; the project's errors become one message on stderr and their exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return get_command(cmd_name) if cmd_name in COMMANDS else None

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0]
        if name not in COMMANDS and not name.startswith("-"):
            raise click.UsageError(no_such_command(name), ctx)
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = group_options_first(args)
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            # An option no one declares, placed before the command: shown with the usage of the
            # command that runs, as if given after it.
            name = command_name(args)
            if name not in COMMANDS:
                raise
            exc.ctx = get_command(name).make_context(name, [], parent=ctx,
                                                     resilient_parsing=True)
            # click types cmd Final, but the usage it shows is read from it
            exc.cmd = exc.ctx.command  # type: ignore[misc]
            raise

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (e.g. `nhwc-onnx ops | head`): stop quietly, as Python's
            # docs advise, pointing stdout at devnull so the final flush cannot fail again.
            _silence_stdout()
            ctx.exit(EXIT_INVALID)
        except StdoutUnwritable as exc:  # e.g. `> /dev/full`: said, then as a broken pipe
            _stdout_refused(exc)
            ctx.exit(EXIT_INVALID)
        except OSError as exc:
            if not _printed_by_click(exc) or ctx.params.get("debug"):
                raise
            _stdout_refused(exc)  # a command's help (`convert -h > /dev/full`)
            ctx.exit(EXIT_INVALID)
        except UsageError as exc:
            if ctx.params.get("debug"):
                raise
            echo(f"Error: {_as_option(exc, ctx)}", err=True)
            ctx.exit(exc.exit_code)
        except NhwcOnnxError as exc:
            if ctx.params.get("debug"):
                raise
            echo(f"Error: {exc}", err=True)
            ctx.exit(exit_code_of(exc))
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            echo(f"Error: internal error in nhwc-onnx ({type(exc).__name__}: {exc}); "
                 "rerun with --debug for the traceback", err=True)
            ctx.exit(EXIT_INVALID)


# The group's own flags, as they may also be written after the command (`convert ... -q`).
_GROUP_FLAG = re.compile(r"-q|--quiet|-v+|--verbose|--debug")


def group_options_first(args: list[str]) -> list[str]:
    """``args`` with the group's flags given after the command moved before it, as users of
    click tools expect them to work anywhere. A word that is the value of the command's own
    option (``--outputs -v``) stays, and so does everything after ``--``."""
    name = command_name(args)
    if name not in COMMANDS:
        return args
    at = args.index(name)
    takes_value = {opt for p in get_command(name).params if isinstance(p, click.Option)
                   and not p.is_flag and not p.count for opt in p.opts + p.secondary_opts}
    moved, rest, value_next = [], [], False
    for i, arg in enumerate(args[at + 1:], at + 1):
        if arg == "--":
            rest += args[i:]
            break
        if not value_next and _GROUP_FLAG.fullmatch(arg):
            moved.append(arg)
        else:
            rest.append(arg)
        value_next = not value_next and arg in takes_value
    return args[:at] + moved + [name] + rest


def _as_option(exc: UsageError, ctx: click.Context) -> UsageError:
    """A library UsageError names the parameter at fault (``feeds``); the command line names
    the option that sets it (``--input``): the command's parameter of that name."""
    command = ctx.command.get_command(ctx, ctx.invoked_subcommand or "") \
        if ctx.invoked_subcommand and isinstance(ctx.command, click.Group) else None
    hint, _, key = exc.param_hint.partition("[")  # mean['x']: the --mean value of input x
    problem = f"{key.rstrip(']')}: {exc.problem}" if key else exc.problem
    if command is not None and command.name in ("convert", "verify"):
        from .conversion_options import parameter_of_field

        hint = parameter_of_field(hint)  # inputs -> input_names, exact_cut -> no_cut ...
    for param in getattr(command, "params", ()):
        if param.name == hint and isinstance(param, click.Option):
            return UsageError(problem, param_hint=param.opts[0])
    return exc


def _printed_by_click(exc: BaseException) -> bool:
    """Whether ``exc`` was raised as click printed (a help text, the version)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "echo" \
        and tb.tb_frame.f_globals.get("__name__") == "click.utils"


def _stdout_refused(exc: OSError) -> None:
    _silence_stdout()
    with contextlib.suppress(OSError):  # stderr refuses too: the exit code is all that is left
        echo(f"Error: cannot write to standard output ({exc.strerror or exc})", err=True)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # not a real file descriptor (e.g. under a test runner)


def exit_code_of(exc: NhwcOnnxError) -> int:
    # A missing optional runtime is a problem of the environment, not of the model: it gets
    # the "cannot read / cannot run" code rather than "invalid model".
    if isinstance(exc, MissingDependencyError):
        return EXIT_UNREADABLE
    return exc.exit_code


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name=PROG,
                      message="%(prog)s, version %(version)s",
                      help="Show the version and exit.")
@click.option("-q", "--quiet", is_flag=True, help="Print only problems and errors.")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug logs).")
@click.option("--debug", is_flag=True, help="Debug logs, and tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, quiet: bool, verbose: int, debug: bool) -> None:
    """Convert TensorFlow, Caffe and ONNX models to the NHWC ONNX dialect; check and run them.

    Exit codes: 0 ok, 1 invalid model or unsupported op, 2 unreadable input, missing runtime or
    a mistake in the command line, 3 verification failed.
    """
    ctx.obj = Settings(verbosity=-1 if quiet else verbose, debug=debug)
    if ctx.invoked_subcommand not in COMMANDS_THAT_NEVER_LOG:
        configure_logging(quiet, verbose, debug)


# Importing logging is a measurable share of a small `check` and of `--help`
# (docs/benchmarks.md, "Measured choices in the code"); nothing `check` runs logs
# (tests/speed/test_startup_imports.py keeps it so).
COMMANDS_THAT_NEVER_LOG = frozenset({"check"})


def configure_logging(quiet: bool, verbose: int, debug: bool) -> None:
    from .logs import configure_logging as configure

    configure(quiet, verbose, debug)


def run_command(args: list[str]) -> int | str | None:
    """Parse ``args`` and run the command; returns its exit status (what it would pass to
    ``sys.exit``). The project's errors become one message on stderr and their exit code;
    a mistake in the command line its usage, where to find help and one ``Error:`` line."""
    try:
        code = cli.main(args=list(args), prog_name=PROG, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # no command: the help, on stderr
        exc.show()
        return exc.exit_code
    except click.UsageError as exc:
        show_usage_error(exc)
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:  # end of input at a prompt (there are none)
        echo("Aborted!", err=True)
        return EXIT_INVALID
    except BrokenPipeError:  # click printing the help or the version
        _silence_stdout()
        return EXIT_INVALID
    except OSError as exc:  # only click's printing of the help or the version gets here
        _stdout_refused(exc)
        return EXIT_INVALID
    except SystemExit as exc:  # a command's own exit code
        return exc.code
    return EXIT_OK if code is None else code


def show_usage_error(exc: click.UsageError) -> None:
    """The usage of the command the mistake was given to, where to find help, then one
    ``Error:`` line (click's own, naming the short help option)."""
    ctx = exc.ctx
    if ctx is not None:
        echo(f"{ctx.get_usage()}\nTry '{ctx.command_path} -h' for help.\n", err=True)
    echo(f"Error: {exc.format_message()}", err=True)


def main() -> None:
    """Console-script entry point."""
    exit_without_teardown(command_line())


def command_line() -> int | str | None:
    """Run the command in ``sys.argv`` and return its exit status (what it would pass to
    ``sys.exit``) instead of exiting."""
    from ..files import signals

    _numpy_settings()
    _collect_garbage_less_often()
    signals.install()
    try:
        _import_before_dispatch(sys.argv[1:])
        code = run_command(sys.argv[1:])
        signals.raise_if_stopped()  # a signal whose exception a finalizer swallowed
        return code
    except signals.StoppedBySignal as exc:
        echo(f"Error: {exc} (temp files removed)", err=True)
        return exc.exit_code
    except SystemExit as exc:  # a broken pipe while click printed
        return exc.code
    finally:
        signals.ignore()  # the command is over: a late signal changes nothing, prints nothing


assert click.UsageError.exit_code == EXIT_USAGE  # click reports a mistake with the same code
