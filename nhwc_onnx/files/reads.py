"""Bounded reads of user files: the one home of "can this path be read, and how much of it".

Every loader (TensorFlow, Caffe, ONNX sources and the dialect reader behind ``check``, ``run``,
``info`` and ``verify``) reads its files through here, so each gets the same guards:

- only regular files are opened: a FIFO, a device (``/dev/zero``), a socket or a directory is
  refused from ``os.stat`` *before* ``open`` (a FIFO would block, a device never ends), and the
  opened descriptor is checked again so a swap between the two calls is caught too;
- a size cap per kind of file (protobuf cannot hold more than 2 GiB);
- external tensor data: the location is a relative path without NUL bytes that resolves inside
  the model's folder to a regular file, ``offset + length`` lies within it, and ``length``
  equals prod(dims) x itemsize, computed with Python integers (no int64 overflow).

Failures raise ModelLoadError (exit code 2: the input cannot be read) with one line.
Imports nothing of the project but ``errors``, so IR, serializer and frontends may all use it.
"""
from __future__ import annotations

import io
import os
import stat
from collections import namedtuple
from typing import BinaryIO

from ..errors import ModelLoadError

MAX_PROTOBUF_BYTES = 2 << 30  # protobuf refuses messages of 2 GiB; a bigger file is not a model
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) \
    | getattr(os, "O_CLOEXEC", 0)


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _os_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def stat_regular(path: str | os.PathLike, label: str) -> os.stat_result:
    """``os.stat`` of ``path`` (symlinks followed), refusing anything but a regular file."""
    if "\0" in os.fspath(path):
        raise ModelLoadError(f"{label}: the path contains a NUL byte")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ModelLoadError(f"{label}: no such file") from None
    except OSError as exc:  # a symlink loop, a name too long, no permission on a folder
        raise ModelLoadError(f"{label}: cannot read ({_os_reason(exc)})") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise ModelLoadError(f"{label}: is {kind}, not a regular file; refused")
    return st


def open_regular(path: str | os.PathLike, label: str,
                 max_bytes: int | None = None) -> tuple[io.BufferedReader, int]:
    """Open a regular file for reading: (file object, size). Refuses non-regular files
    without opening them, and files over ``max_bytes``."""
    before = stat_regular(path, label)
    if max_bytes is not None and before.st_size > max_bytes:
        raise ModelLoadError(f"{label}: is {before.st_size} bytes, more than the "
                             f"{max_bytes} a file of this kind can hold; refused")
    try:
        fd = os.open(path, _OPEN_FLAGS)  # non-blocking: a FIFO swapped in cannot hang us
    except OSError as exc:
        raise ModelLoadError(f"{label}: cannot read ({_os_reason(exc)})") from None
    after = os.fstat(fd)
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino) \
            or not stat.S_ISREG(after.st_mode):
        os.close(fd)
        raise ModelLoadError(f"{label}: the file changed while it was being opened; refused")
    return os.fdopen(fd, "rb"), after.st_size


def read_regular(path: str | os.PathLike, label: str,
                 max_bytes: int | None = MAX_PROTOBUF_BYTES, writable: bool = False):
    """All bytes of a regular file of at most ``max_bytes`` (read once, bounded by its size);
    a bytearray with ``writable`` (arrays viewing it can then be modified in place)."""
    f, size = open_regular(path, label, max_bytes)
    data: bytes | bytearray
    with f:
        try:
            if writable:
                data = bytearray(size)
                got = f.readinto(data)
            else:
                data = f.read(size)
                got = len(data)
        except OSError as exc:
            raise ModelLoadError(f"{label}: cannot read ({_os_reason(exc)})") from None
    if got != size:
        raise ModelLoadError(f"{label}: the file changed while it was being read")
    return data


def map_regular(path: str | os.PathLike, label: str,
                max_bytes: int | None = MAX_PROTOBUF_BYTES):
    """A read-only memory map of a regular file (bytes for an empty one): weights viewed in
    place are never copied."""
    import mmap

    f, size = open_regular(path, label, max_bytes)
    with f:
        if size == 0:
            return b""
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError) as exc:
            raise ModelLoadError(f"{label}: cannot map ({exc})") from None


RELEASE_MIN_BYTES = 1 << 20  # smaller weights are not worth a finalizer
# External tensors of this size or more are mapped, smaller ones read (a mapping costs a
# system call and at least a page of address space).
MAP_MIN_BYTES = 1 << 16


def mapped_array(buffer, dtype, count: int, offset: int, shape: tuple):
    """A read-only numpy view of ``count`` elements at ``offset`` of a read buffer.

    When ``buffer`` is a memory map, the view's whole pages are handed back to the kernel
    once the view is garbage collected: a weight that a pass replaced (BatchNorm folding, a
    layout transpose) stops counting in the process's memory instead of staying resident
    until the last view of the file dies. Dropping pages of a read-only file mapping is
    always safe: another view of the same bytes reads them again from the page cache.
    """
    import mmap
    import weakref

    import numpy as np

    view = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).reshape(shape)
    length = count * view.dtype.itemsize
    if length >= RELEASE_MIN_BYTES and isinstance(buffer, mmap.mmap) \
            and hasattr(mmap, "MADV_DONTNEED"):  # not on Windows
        start = -(-offset // mmap.PAGESIZE) * mmap.PAGESIZE
        end = (offset + length) // mmap.PAGESIZE * mmap.PAGESIZE
        if end > start:
            release = weakref.finalize(view, _release_pages, buffer, start, end - start)
            release.atexit = False  # the process is ending: the kernel frees everything
    return view


# id(array) -> (weak reference to it, the file bytes it views): see file_origin.
_ORIGINS: dict[int, tuple] = {}


def _remember_origin(array, span: ExternalSpan) -> None:
    import weakref

    key = id(array)
    _ORIGINS[key] = (weakref.ref(array, lambda _ref: _ORIGINS.pop(key, None)), span)


def remember_origin(array, path: str | os.PathLike, offset: int) -> None:
    """Record that ``array`` (a read-only view of a mapped file) holds the ``array.nbytes``
    bytes at ``offset`` of ``path``, in ONNX's raw byte order."""
    _remember_origin(array, ExternalSpan(os.path.realpath(path), offset, array.nbytes))


def file_origin(array) -> ExternalSpan | None:
    """The file bytes ``array`` views unchanged (a mapped weight as the reader returned it),
    or None: a runtime may read the same bytes from the file instead of a copy."""
    entry = _ORIGINS.get(id(array))
    if entry is None or entry[0]() is not array:
        return None
    return entry[1]


def _release_pages(buffer, start: int, length: int) -> None:
    import mmap

    if not buffer.closed:
        buffer.madvise(mmap.MADV_DONTNEED, start, length)


# -- external tensor data -----------------------------------------------------------------


class ExternalSpan(namedtuple("ExternalSpan", "path offset length")):
    """A checked byte range of an external data file (``path``: resolved, inside the model's
    folder, a regular file). A named tuple, not a dataclass: see errors.py."""

    __slots__ = ()

    def read(self, label: str) -> bytes:
        f = self._open(label)
        with f:
            data = f.read(self.length)
        if len(data) != self.length:
            raise ModelLoadError(f"{label}: the file changed while it was being read")
        return data

    def array(self, dtype, shape: tuple, label: str):
        """The span as a read-only numpy array of ``dtype`` (stored little endian) and
        ``shape``. A span of MAP_MIN_BYTES or more is a memory map of the file: nothing is
        read until used, nothing is copied, and a runtime can be pointed at the same bytes
        (``file_origin``). A smaller one is read."""
        import numpy as np

        dtype = np.dtype(dtype)
        stored = dtype.newbyteorder("<")
        count = self.length // dtype.itemsize
        f = self._open(label)
        with f:
            if self.length < MAP_MIN_BYTES:
                array = np.fromfile(f, dtype=stored, count=count)
                if array.size != count:
                    raise ModelLoadError(f"{label}: the file changed while it was being read")
                array.flags.writeable = False
            else:
                array = self._map(f, stored, count, label)
        array = array.reshape(shape)
        if stored != dtype:  # a big-endian machine computes in its own byte order
            return array.astype(dtype)
        if self.length >= MAP_MIN_BYTES:
            _remember_origin(array, self)
        return array

    def _map(self, f, dtype, count: int, label: str):
        import mmap

        start = self.offset // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY
        try:  # only the span's pages: a weight file bigger than the address space still maps
            buffer = mmap.mmap(f.fileno(), self.offset + self.length - start,
                               access=mmap.ACCESS_READ, offset=start)
        except (ValueError, OSError) as exc:
            raise ModelLoadError(f"{label}: cannot map the external data ({exc})") from None
        return mapped_array(buffer, dtype, count, self.offset - start, (count,))

    def _open(self, label: str) -> BinaryIO:
        f, size = open_regular(self.path, label)
        if self.offset + self.length > size:  # shrank since it was checked
            f.close()
            raise ModelLoadError(f"{label}: the file changed while it was being read")
        f.seek(self.offset)
        return f


def element_count(dims, where: str) -> int:
    """prod(dims) as a Python int; negative dimensions are refused."""
    count = 1
    for d in dims:
        d = int(d)
        if d < 0:
            raise ModelLoadError(f"{where}: negative dimension {d} in {list(map(int, dims))}")
        count *= d
    return count


def external_span(base_dir: str | os.PathLike, info: dict[str, str], dims,
                  itemsize: int | None, where: str) -> ExternalSpan:
    """Check one tensor's external-data entry (ONNX ``external_data`` key/values).

    ``itemsize`` None means the element size is unknown (strings): the length is then taken
    from the entry or the rest of the file, without the dims check.
    """
    location = info.get("location", "")
    if not isinstance(location, str) or not all(isinstance(v, str) for v in info.values()):
        raise ModelLoadError(f"{where}: external data entry is not UTF-8 text (corrupt file?)")
    if not location:
        raise ModelLoadError(f"{where} is stored externally but names no location")
    if "\0" in location:
        raise ModelLoadError(f"{where}: external data location {location!r} contains a NUL "
                             "byte; refused")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location:
        raise ModelLoadError(
            f"{where}: external data location '{location}' is absolute; refused "
            "(it must be a path inside the model's folder)")
    base_real = os.path.realpath(base_dir)
    full = os.path.realpath(os.path.join(base_real, location))
    if os.path.commonpath([full, base_real]) != base_real:
        raise ModelLoadError(
            f"{where}: external data location '{location}' points outside the model's "
            "folder; refused")
    if not os.path.lexists(full):
        raise ModelLoadError(f"{where}: external data file '{location}' does not exist")
    size = stat_regular(full, f"{where}: external data file '{location}'").st_size
    try:
        offset = int(info.get("offset") or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        raise ModelLoadError(f"{where}: bad external data offset/length "
                             f"({info.get('offset')!r}, {info.get('length')!r})") from None
    if offset < 0 or (length is not None and length < 0):
        raise ModelLoadError(f"{where}: negative external data offset/length")
    expected = None if itemsize is None else element_count(dims, where) * itemsize
    if length is None:
        length = expected if expected is not None else max(size - offset, 0)
    if expected is not None and length != expected:
        raise ModelLoadError(f"{where}: external data length {length} does not match the "
                             f"tensor's {expected} bytes")
    if offset + length > size:
        raise ModelLoadError(f"{where}: external data file '{location}' is too short "
                             f"(truncated?): {size} bytes, needs {offset + length}")
    return ExternalSpan(full, offset, length)
