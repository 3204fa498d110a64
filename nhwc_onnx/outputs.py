"""Where nhwc-onnx may write: the checks every output path passes, and atomic text writes.

Every file the converter writes (a model, its external-data file, a report) must be absent or a
regular file, must not be one of the inputs (same path, same inode, or inside an input folder)
and must not be another output of the same run. A symlink to a regular file is written
*through*: the link stays and its target is replaced. All checks run before converting, and a
write goes to a temp file in the same folder that is renamed over the target at the end (and
removed on every error or signal).
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from .errors import OutputPathError

_KINDS = [(stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")]


def write_target(path: str | os.PathLike, role: str = "output") -> Path:
    """The file that writing ``path`` replaces, after checking it may be replaced.

    Refuses a directory, anything that is not a regular file (device, FIFO, socket), a
    dangling symlink and a folder that cannot be written. A symlink resolves to its target.
    """
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if path.is_symlink() and not target.exists():
        raise OutputPathError(f"{path}: a symlink to '{target}', which does not exist; refused "
                              f"as the {role}")
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot be used as the {role} ({_reason(exc)})") from None
    if mode is not None:
        if stat.S_ISDIR(mode):
            raise OutputPathError(f"{path}: is a directory, expected a file name for the {role}")
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            via = f" (via the symlink to '{target}')" if target != path else ""
            raise OutputPathError(f"{path}: is {kind}{via}; only a regular file can be the "
                                  f"{role}, nothing was written")
    _check_folder(path, target, role)
    return target


def _check_folder(path: Path, target: Path, role: str) -> None:
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputPathError(f"{path}: '{folder}' is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{path}: no permission to write the {role} in '{folder}'")


def same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name one file (same inode, or the same resolved path)."""
    try:
        if a.exists() and b.exists() and os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)  # realpath: no error on a symlink loop


def _inside(path: Path, folder: Path) -> bool:
    return folder.is_dir() and Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def plan_targets(targets: Sequence[tuple[str, Path]], inputs: Iterable[Path]) -> list[Path]:
    """Check every (role, path) a run will write; returns the files to replace, in order.

    Raises one OutputPathError listing every problem: a target that is an input (or inside an
    input folder), two targets naming one file, or a target ``write_target`` refuses.
    """
    inputs = [Path(p) for p in inputs]
    problems: list[str] = []
    planned: list[tuple[str, Path, Path]] = []
    for role, path in targets:
        path = Path(path)
        try:
            target = write_target(path, role)
        except OutputPathError as exc:
            problems.append(str(exc))
            continue
        hit = next((p for p in inputs if same_file(path, p) or _inside(target, p)), None)
        if hit is not None:
            problems.append(f"{path}: the {role} would overwrite the input '{hit}'; choose "
                            "another path")
        clash = next(((r, p) for r, p, t in planned if same_file(target, t)), None)
        if clash is not None:
            problems.append(f"{path}: the {role} and the {clash[0]} '{clash[1]}' are the same "
                            "file; choose distinct paths")
        planned.append((role, path, target))
    if problems:
        raise OutputPathError("\n".join(problems))
    return [t for _, _, t in planned]


def atomic_write_text(path: str | os.PathLike, text: str, role: str = "output") -> Path:
    """Replace ``path`` (through a symlink) with ``text`` in one rename; no temp file survives."""
    target = write_target(path, role)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot create the folder ({_reason(exc)})") from None
    mode = file_mode(target)
    with temp_files(path, role) as temps:
        with open_temp(target, temps, "w") as handle:
            handle.write(text)
        os.chmod(temps[-1], mode)
        os.replace(temps[-1], target)
    return target


@contextlib.contextmanager
def temp_files(path: str | os.PathLike, role: str = "output"):
    """Yield the list that ``open_temp`` registers temp files in; on any error or signal
    (KeyboardInterrupt, SystemExit) remove them, and report an OSError as unusable ``path``."""
    temps: list[Path] = []
    try:
        yield temps
    except BaseException as exc:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputPathError(f"{path}: cannot write the {role} ({_reason(exc)})") from None
        raise


def write_json(path: str | os.PathLike, data: dict, role: str = "report") -> Path:
    """``data`` as indented, key-sorted JSON, written like ``atomic_write_text``."""
    text = json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    return atomic_write_text(path, text, role=role)


def open_temp(target: Path, temps: list[Path], mode: str = "wb"):
    """A new hidden temp file beside ``target`` (``.<name>.<random>.tmp``, mode 0600).

    Its path goes into ``temps`` *before* the file exists, so a signal arriving at any moment
    leaves nothing the caller's cleanup does not know about (tempfile has such a window).
    """
    def create(name, flags):
        return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)

    while True:
        # os.urandom is what secrets.token_hex reads; importing secrets costs ~8 ms per process.
        tmp = target.with_name(f".{target.name}.{os.urandom(4).hex()}.tmp")
        temps.append(tmp)
        try:
            return open(tmp, mode, encoding=None if "b" in mode else "utf-8", opener=create)
        except FileExistsError:
            temps.remove(tmp)  # another file's name: not ours to clean up


def file_mode(path: Path) -> int:
    """The mode a plain open() would give: the existing file's, else 0666 minus the umask
    (temp files are created 0600)."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
