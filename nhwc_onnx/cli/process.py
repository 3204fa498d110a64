"""What the command line does to its own process: numpy's settings before numpy loads, fewer
garbage collections, the imports done before dispatch, and the exit without teardown. None of
it is the library's business (tests/speed and tests/cli/test_exit_without_teardown.py)."""
from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys

from ..errors import EXIT_INVALID, EXIT_OK

TYPE_CHECKING = False
if TYPE_CHECKING:  # only for annotations: --help does not import typing
    import typing


NUMPY_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1", "NUMPY_MADVISE_HUGEPAGE": "0"}


def _numpy_settings() -> None:
    """Two numpy defaults that cost a converter time, unless the user set them.

    OpenBLAS starts a worker per core at import that spins before it sleeps: 0.05-0.12 s of
    CPU in every command, on the core a CI job or a batch's other worker needs, while no
    command does linear algebra big enough to share (batches use processes instead).
    Huge pages for large arrays make the kernel compact memory on first touch: folded weights
    are written once and read once, so they gain nothing and a conversion sometimes stalls
    (ResNet-50: slowest of 11 runs 0.56-0.60 s -> 0.46-0.48 s, same median).
    Must run before numpy is first imported; the library API leaves the environment alone.
    """
    for name, value in NUMPY_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


# What a command imports in any case, imported before the command runs. Inside the command
# the same imports run frames deeper, where CPython 3.11's frame stack keeps crossing the end
# of a 16 KB chunk: each crossing maps a fresh chunk and unmaps it on return (two system calls
# and a page fault). Converting MobileNetV2 mapped 348 chunks this way (~970 under click's
# deeper dispatch, 9,070 -> 8,100 page faults); imported from here, 4.
# tests/speed/test_preload.py checks that each command listed imports these anyway.
_NUMPY_AND_PROTOBUF = ("numpy", "google.protobuf.message_factory")
IMPORTED_BEFORE_DISPATCH = {
    **dict.fromkeys(("check", "convert", "verify", "info", "lower", "run"), _NUMPY_AND_PROTOBUF),
    "ops": ("numpy",),
}
HELP_OPTIONS = frozenset({"-h", "--help"})


def command_name(args: list[str]) -> str | None:
    """The subcommand in ``args``: the group's own options are flags, so it is the first word
    that is not an option."""
    return next((a for a in args if not a.startswith("-")), None)


def _import_before_dispatch(args: list[str]) -> None:
    if not HELP_OPTIONS.isdisjoint(args):  # a help text needs none of them
        return
    for module in IMPORTED_BEFORE_DISPATCH.get(command_name(args) or "", ()):
        importlib.import_module(module)  # required dependencies: a failure is a broken install


# One command is one short process. Python examines its youngest objects for reference cycles
# every 700 container allocations net of frees; a conversion keeps tens of thousands of IR
# objects alive, so those ~80 collections (and the older-generation ones they trigger, which
# walk what the imports made) find almost nothing but cost time; freezing what the start-up
# loaded and collecting every 100,000 allocations costs a fifth of that (docs/benchmarks.md,
# "Measured choices in the code"). Cycles that become
# garbage are still collected, at most that many objects later (a few MB), and none of them
# holds a weight: replaced weights go with their last reference; batches and the exact-cut
# search collect each finished model before the next (tests/speed/test_gc_settings.py).
GC_YOUNG_ALLOCATIONS = 100_000


def _collect_garbage_less_often() -> None:
    gc.freeze()  # the modules and objects loaded so far live until the process ends
    _, *older = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_ALLOCATIONS, *older)


# Top-level packages whose native code may still hold output in C buffers or run C++
# destructors at exit: with one of them loaded (or a thread still running) the process ends the
# ordinary way.
NATIVE_FRAMEWORKS = frozenset({"tensorflow", "onnxruntime", "cv2", "openvino", "torch"})


def exit_without_teardown(code) -> typing.NoReturn:
    """End the process as ``sys.exit(code)`` would, without the interpreter's teardown.

    Finalizing every module and freeing every object took 0.04 s of the 0.19 s of a `check`;
    the kernel frees the memory anyway. What teardown does that matters is done here: the
    atexit handlers (logging's flush, finalizers of temp objects, multiprocessing's joins), then
    stdout and stderr are flushed. A flush that fails (the reader went away) exits 1, as a
    broken pipe does during a command.
    """
    if code is None:
        code = EXIT_OK
    elif not isinstance(code, int):  # sys.exit("message") prints it and exits 1
        print(code, file=sys.stderr)
        code = EXIT_INVALID
    if not NATIVE_FRAMEWORKS.isdisjoint(name.partition(".")[0] for name in list(sys.modules)) \
            or _threads_to_wait_for():
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started with that descriptor closed: nothing was written
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or EXIT_INVALID
    os._exit(code)


def _threads_to_wait_for() -> bool:
    """Whether a non-daemon thread still runs (the ordinary exit waits for it)."""
    threading = sys.modules.get("threading")
    if threading is None:
        return False
    main_thread = threading.main_thread()
    return any(t is not main_thread and not t.daemon and t.is_alive()
               for t in threading.enumerate())
