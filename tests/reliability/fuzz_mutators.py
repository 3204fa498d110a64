"""Seeded mutations of model files: raw bytes, and protobuf messages edited field by field.

The structure-aware mutator walks any protobuf message by reflection (ModelProto, GraphDef,
NetParameter alike), picks one field and gives it a hostile value: extreme integers, NaN,
empty or foreign strings (other names of the same model, so references dangle, loop or
collide), wrong enum values, deleted or duplicated repeated elements. All randomness comes
from the ``random.Random`` passed in, so a (seed, case number) pair replays exactly.
"""
from __future__ import annotations

import random
from collections.abc import Iterator

from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.message import Message

# -- bytes ------------------------------------------------------------------------------------

_SPECIAL_BYTES = (0x00, 0xFF, 0x7F, 0x80, 0x01, 0x08, 0x0A, 0x12)


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One byte-level mutation: (new bytes, what was done)."""
    buf = bytearray(data)
    if not buf:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))), "random bytes"
    kind = rng.choice(["flip", "flip", "set", "insert", "delete", "truncate", "duplicate"])
    pos = rng.randrange(len(buf))
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            p = rng.randrange(len(buf))
            buf[p] ^= 1 << rng.randrange(8)
        return bytes(buf), "flip bits"
    if kind == "set":
        buf[pos] = rng.choice(_SPECIAL_BYTES)
        return bytes(buf), f"set byte {pos}"
    if kind == "insert":
        chunk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
        return bytes(buf[:pos] + chunk + buf[pos:]), f"insert {len(chunk)} at {pos}"
    if kind == "delete":
        n = rng.randint(1, max(1, min(64, len(buf) - pos)))
        return bytes(buf[:pos] + buf[pos + n:]), f"delete {n} at {pos}"
    if kind == "truncate":
        return bytes(buf[:pos]), f"truncate at {pos}"
    n = rng.randint(1, min(64, len(buf) - pos))
    return bytes(buf[:pos + n] + buf[pos:pos + n] + buf[pos + n:]), f"duplicate {n} at {pos}"


# -- protobuf messages --------------------------------------------------------------------------

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_RANGES = {
    FD.TYPE_INT32: _INT32, FD.TYPE_SINT32: _INT32, FD.TYPE_SFIXED32: _INT32,
    FD.TYPE_INT64: _INT64, FD.TYPE_SINT64: _INT64, FD.TYPE_SFIXED64: _INT64,
    FD.TYPE_UINT32: (0, (1 << 32) - 1), FD.TYPE_FIXED32: (0, (1 << 32) - 1),
    FD.TYPE_UINT64: (0, (1 << 64) - 1), FD.TYPE_FIXED64: (0, (1 << 64) - 1),
}
_HOSTILE_STRINGS = ("", "x", "../../outside", "/abs/path", "NCHW", "NHWC", "SAME", "VALID",
                    "EXPLICIT", "\u00e9\u00e8", "a:1", "^x", "a" * 300)


def _extreme_int(current: int, lo: int, hi: int, rng: random.Random) -> int:
    choices = [0, 1, -1, 2, 3, 1 << 40, -(1 << 40), 1 << 31, (1 << 31) - 1, -(1 << 31),
               lo, hi, current + 1, current - 1, current * 2, current * 1000, -current,
               rng.randint(-8, 64)]
    return min(hi, max(lo, rng.choice(choices)))


def _extreme_float(current: float, rng: random.Random) -> float:
    return rng.choice([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e38, -1e38,
                       1e-45, -1.0, 1.0, 0.5, current * 1e6, -current])


def _leaves(msg: Message) -> Iterator[tuple[Message, FD, object]]:
    """(message, field, key) for every set field, recursively. ``key`` is None for a whole
    field, an index for a repeated element, or a map key."""
    for fd, value in msg.ListFields():
        is_map = fd.type == FD.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry
        if is_map:
            yield msg, fd, None
            value_fd = fd.message_type.fields_by_name["value"]
            for key in sorted(value):  # map order varies between processes: sort it
                if value_fd.type == FD.TYPE_MESSAGE:
                    yield from _leaves(value[key])
                else:
                    yield msg, fd, ("map", key)
        elif fd.is_repeated:
            yield msg, fd, None
            for i, item in enumerate(value):
                if fd.type == FD.TYPE_MESSAGE:
                    yield from _leaves(item)
                else:
                    yield msg, fd, i
        elif fd.type == FD.TYPE_MESSAGE:
            yield msg, fd, None
            yield from _leaves(value)
        else:
            yield msg, fd, None


def string_pool(msg: Message) -> list[str]:
    """Every string value in ``msg``: renaming one field to another's value makes references
    collide, dangle or loop."""
    pool: set[str] = set()
    for parent, fd, key in _leaves(msg):
        if fd.type != FD.TYPE_STRING:
            continue
        value = getattr(parent, fd.name)
        if key is None and not fd.is_repeated:
            pool.add(value)
        elif isinstance(key, int):
            pool.add(value[key])
    return sorted(pool)


def _new_scalar(fd: FD, current, rng: random.Random, pool: list[str]):
    if fd.type in _RANGES:
        lo, hi = _RANGES[fd.type]
        return _extreme_int(int(current or 0), lo, hi, rng)
    if fd.type in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
        return _extreme_float(float(current or 0.0), rng)
    if fd.type == FD.TYPE_BOOL:
        return not current
    if fd.type == FD.TYPE_STRING:
        options = list(_HOSTILE_STRINGS) + pool * 3 + [(current or "") + "_renamed"]
        return rng.choice(options)
    if fd.type == FD.TYPE_BYTES:
        cur = bytes(current or b"")
        return rng.choice([b"", cur[: len(cur) // 2], cur + cur[:7], cur[1:],
                           bytes(rng.randrange(256) for _ in range(rng.randint(1, 9))),
                           b"\xff" * 8, b"NCHW", b"SAME"])
    if fd.type == FD.TYPE_ENUM:
        values = [v.number for v in fd.enum_type.values]
        return rng.choice(values + [max(values) + 1, -1])
    raise TypeError(fd.type)


def _mutate_leaf(parent: Message, fd: FD, key, rng: random.Random, pool: list[str]) -> str:
    name = fd.name
    field = getattr(parent, name)
    if isinstance(key, tuple):  # a map entry with a scalar value
        field[key[1]] = _new_scalar(fd.message_type.fields_by_name["value"], field[key[1]],
                                    rng, pool)
        return f"set {name}[{key[1]!r}]"
    if isinstance(key, int):
        field[key] = _new_scalar(fd, field[key], rng, pool)
        return f"set {name}[{key}]"
    is_map = fd.type == FD.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry
    if is_map:
        keys = sorted(field)
        if keys:
            del field[rng.choice(keys)]
        return f"delete an entry of {name}"
    if fd.is_repeated:
        n = len(field)
        action = rng.choice(["delete", "duplicate", "clear", "reverse"])
        if action == "delete" and n:
            del field[rng.randrange(n)]
        elif action == "duplicate" and n:
            item = field[rng.randrange(n)]
            if fd.type == FD.TYPE_MESSAGE:
                field.add().CopyFrom(item)
            else:
                field.append(item)
        elif action == "clear":
            del field[:]
        elif n > 1:
            items = list(field)
            if fd.type == FD.TYPE_MESSAGE:
                copies = [type(i)() for i in items]
                for c, i in zip(copies, items):
                    c.CopyFrom(i)
                del field[:]
                for c in reversed(copies):
                    field.add().CopyFrom(c)
            else:
                del field[:]
                field.extend(reversed(items))
        return f"{action} {name}"
    if fd.type == FD.TYPE_MESSAGE:
        parent.ClearField(name)
        return f"clear {name}"
    setattr(parent, name, _new_scalar(fd, getattr(parent, name), rng, pool))
    return f"set {name}"


def mutate_message(msg: Message, rng: random.Random, extra_strings=(), count: int = 1
                   ) -> list[str]:
    """Apply ``count`` field mutations to ``msg`` in place; returns what was done."""
    done = []
    pool = string_pool(msg) + list(extra_strings)
    for _ in range(count):
        leaves = list(_leaves(msg))
        if not leaves:
            break
        parent, fd, key = rng.choice(leaves)
        try:
            done.append(_mutate_leaf(parent, fd, key, rng, pool))
        except (ValueError, TypeError) as exc:  # e.g. a closed enum refusing a number
            done.append(f"skipped {fd.name} ({type(exc).__name__})")
    return done
