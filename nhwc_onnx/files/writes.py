"""Where nhwc-onnx may write: the checks every output path passes, and atomic text writes.

Every file the converter writes (a model, its external-data file, a report) must be absent or a
regular file, must not be one of the inputs (same path, same inode, or inside an input folder)
and must not be another output of the same run. A path the user named (``-o``, ``--report``)
that is a symlink to a regular file is written *through*: the link stays and its target is
replaced. A path the tool derived (a batch's ``DIR/<name>.onnx`` and reports, ``run``'s
``.npy`` files, the ``.data`` file beside a model) is never followed (``follow_symlinks=False``):
a symlink there is replaced by the new file and its target is left alone, so a link planted in
a shared folder cannot redirect the write. All checks run before converting, and a write goes
to a temp file in the same folder that is renamed over the target at the end (and removed on
every error or signal); a rename replaces the name itself, never what a link there points to.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import BinaryIO

from ..errors import OutputPathError

_KINDS = [(stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")]


# The longest file name (one path component, in bytes) the common file systems take; longer
# names fail with ENAMETOOLONG, and a name the tool derives is shortened to fit (``fitted``).
NAME_MAX = 255


def fitted(stem: str, suffix: str, reserve: int = 0) -> str:
    """``stem + suffix`` when it fits in a file name (with ``reserve`` bytes to spare for a
    ``_N`` that makes it unique); else the stem cut short and followed by a hash of the whole
    stem, so that two long names that differ only at their ends stay distinct."""
    room = NAME_MAX - len(os.fsencode(suffix)) - reserve
    if len(os.fsencode(stem)) <= room:
        return stem + suffix
    import hashlib

    digest = hashlib.sha256(os.fsencode(stem)).hexdigest()[:12]
    head = os.fsencode(stem)[:room - len(digest) - 1].decode("utf-8", "ignore")
    return f"{head}~{digest}{suffix}"


def write_target(path: str | os.PathLike, role: str = "output", *,
                 follow_symlinks: bool = True) -> Path:
    """The file that writing ``path`` replaces, after checking it may be replaced.

    Refuses a directory, anything that is not a regular file (device, FIFO, socket), a
    dangling symlink, a name too long for a file system and a folder that cannot be written.
    A symlink resolves to its target; with ``follow_symlinks=False`` it is the symlink itself
    that the write replaces.
    """
    path = Path(path)
    too_long = next((part for part in path.parts if len(os.fsencode(part)) > NAME_MAX), None)
    if too_long is not None:
        raise OutputPathError(f"{path}: the name '{too_long[:32]}...' is "
                              f"{len(os.fsencode(too_long))} bytes, more than the {NAME_MAX} a "
                              f"file name may have; refused as the {role}")
    try:
        return _write_target(path, role, follow_symlinks)
    except OSError as exc:  # the whole path too long, a folder we may not search
        raise OutputPathError(f"{path}: cannot be used as the {role} ({_reason(exc)})") from None


def _write_target(path: Path, role: str, follow_symlinks: bool) -> Path:
    if path.is_symlink() and not follow_symlinks:
        _check_folder(path, path, role)
        return path
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if path.is_symlink() and not target.exists():
        raise OutputPathError(f"{path}: a symlink to '{target}', which does not exist; refused "
                              f"as the {role}")
    try:
        mode = target.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):  # a file in the way: said by _check_folder
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
    """The folder of ``target`` (or, when it is missing, the nearest existing folder above it,
    where the missing ones will be created) must be a folder we may write in."""
    folder = target.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        if folder.is_symlink():
            raise OutputPathError(f"{path}: '{folder}' is a symlink to "
                                  f"'{os.readlink(folder)}', which is not an existing folder")
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
    try:
        is_dir = folder.is_dir()
    except OSError:  # an input whose name is too long: reading it fails, with its own error
        return False
    return is_dir and Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def plan_targets(targets: Sequence[tuple[str, Path]], inputs: Iterable[Path], *,
                 follow_symlinks: bool = True) -> list[Path]:
    """Check every (role, path) a run will write; returns the files to replace, in order.

    Raises one OutputPathError listing every problem: a target that is an input (or inside an
    input folder), two targets naming one file, or a target ``write_target`` refuses. A symlink
    to an input is refused whether or not the paths are followed (``follow_symlinks``).
    """
    inputs = [Path(p) for p in inputs]
    problems: list[str] = []
    planned: list[tuple[str, Path, Path]] = []
    for role, path in targets:
        path = Path(path)
        try:
            target = write_target(path, role, follow_symlinks=follow_symlinks)
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


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object],
                 role: str = "output", *, follow_symlinks: bool = True) -> Path:
    """Replace ``path`` with what ``write(handle)`` writes, in one rename (through a symlink
    unless ``follow_symlinks`` is False); no temp file survives an error or a signal, and an
    OSError (a full disk, a folder we may not write in) is an OutputPathError naming ``path``."""
    target = write_target(path, role, follow_symlinks=follow_symlinks)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot create the folder ({_reason(exc)})") from None
    mode = file_mode(target)
    with temp_files(path, role) as temps:
        with open_temp(target, temps) as handle:
            write(handle)
        os.chmod(temps[-1], mode)
        publish(temps[-1], target)
    return target


def atomic_write_text(path: str | os.PathLike, text: str, role: str = "output", *,
                      follow_symlinks: bool = True) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) like ``atomic_write``."""
    data = text.encode("utf-8")
    return atomic_write(path, lambda handle: handle.write(data), role,
                        follow_symlinks=follow_symlinks)


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


def publish(temp: str | os.PathLike, target: str | os.PathLike, *,
            check_signal: bool = True) -> None:
    """Rename a finished temp file over ``target``: the moment a write becomes visible, so
    never after a signal (``signals.raise_if_stopped``; the caller's cleanup removes the temp
    file). Inside ``all_or_nothing`` the rename waits for the end of that block."""
    pending = _PENDING.get()
    if pending is not None:
        pending.append((Path(temp), Path(target)))
        return
    if check_signal:
        from .signals import raise_if_stopped

        raise_if_stopped()
    os.replace(temp, target)


# The renames an ``all_or_nothing`` block has put off (None outside such a block).
_PENDING: contextvars.ContextVar[list[tuple[Path, Path]] | None] = contextvars.ContextVar(
    "nhwc_onnx_pending_renames", default=None)


@contextlib.contextmanager
def all_or_nothing():
    """Every file written in the block (its temp file is complete) becomes visible together
    when the block ends without error; on any error or signal none does and every temp file
    is removed. One command's outputs (a model, its report, its HTML page) are then written
    all or not at all: a report that cannot be written leaves an existing model as it was."""
    if _PENDING.get() is not None:  # nested: the outer block publishes
        yield
        return
    pending: list[tuple[Path, Path]] = []
    token = _PENDING.set(pending)
    try:
        try:
            yield
        finally:
            _PENDING.reset(token)
        from .signals import raise_if_stopped

        raise_if_stopped()
        while pending:  # no check between the renames: they are one publication
            temp, target = pending[0]
            try:
                os.replace(temp, target)
            except OSError as exc:
                raise OutputPathError(f"{target}: cannot be written ({_reason(exc)})"
                                      ) from None
            pending.pop(0)
    except BaseException:
        for temp, _ in pending:
            temp.unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, data: dict, role: str = "report", *,
               follow_symlinks: bool = True) -> Path:
    """``data`` as indented, key-sorted JSON, written like ``atomic_write_text``."""
    text = json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    return atomic_write_text(path, text, role=role, follow_symlinks=follow_symlinks)


def open_temp(target: Path, temps: list[Path], mode: str = "wb"):
    """A new hidden temp file beside ``target`` (``.<name>.<random>.tmp``, mode 0600).

    Its path goes into ``temps`` *before* the file exists, so a signal arriving at any moment
    leaves nothing the caller's cleanup does not know about (tempfile has such a window).
    """
    def create(name, flags):
        return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)

    while True:
        # os.urandom is what secrets.token_hex reads, without importing secrets on every start.
        tmp = target.with_name(fitted(f".{target.name}", f".{os.urandom(4).hex()}.tmp"))
        temps.append(tmp)
        try:
            return open(tmp, mode, encoding=None if "b" in mode else "utf-8", opener=create)
        except FileExistsError:
            temps.remove(tmp)  # another file's name: not ours to clean up


def file_mode(path: Path) -> int:
    """The mode a plain open() would give: the existing regular file's, else 0666 minus the
    umask (temp files are created 0600). A symlink being replaced lends no mode: its target
    is not ours."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        mode = 0
    if stat.S_ISREG(mode):
        return mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
