"""Permutation algebra for the NCHW -> NHWC pass.

A value's layout is a permutation ``sigma`` of its source axes: the tensor we store is
``source.transpose(sigma)`` (stored axis i holds source axis sigma[i]). The identity means the
value is stored as the source has it; ``NHWC = (0, 2, 3, 1)`` is an NCHW feature map stored NHWC.
Two layouts of one tensor have the same bytes (so a Reshape converts between them exactly) when
the source axes larger than 1 appear in the same order in both.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Perm = tuple[int, ...]
NHWC: Perm = (0, 2, 3, 1)


def channels_last(rank: int) -> Perm:
    """The stored layout of a channels-first (NCHW / NCDHW) image: channels moved last."""
    return (0, *range(2, rank), 1)


def channels_first_perm(rank: int) -> list[int]:
    """The perm of a source Transpose that turns a channels-last tensor into channels-first."""
    return [0, rank - 1, *range(1, rank - 1)]


def identity(rank: int) -> Perm:
    return tuple(range(rank))


def is_identity(sigma: Sequence[int]) -> bool:
    return all(i == a for i, a in enumerate(sigma))


def inverse(sigma: Sequence[int]) -> Perm:
    inv = [0] * len(sigma)
    for i, a in enumerate(sigma):
        inv[a] = i
    return tuple(inv)


def stored_shape(src_shape: Sequence[int], sigma: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(src_shape[a]) for a in sigma)


def nonunit_order(src_shape: Sequence[int], sigma: Sequence[int]) -> list[int]:
    """Source axes of size > 1 in the order they are stored."""
    return [a for a in sigma if src_shape[a] != 1]


def same_bytes(src_shape: Sequence[int], sigma_a: Sequence[int], sigma_b: Sequence[int]) -> bool:
    return nonunit_order(src_shape, sigma_a) == nonunit_order(src_shape, sigma_b)


def transpose_between(sigma_from: Sequence[int], sigma_to: Sequence[int]) -> Perm:
    """perm q with stored_to = stored_from.transpose(q)."""
    inv = inverse(sigma_from)
    return tuple(inv[a] for a in sigma_to)


def pad_sigma(sigma: Sequence[int], rank: int) -> Perm:
    """The layout of a value broadcast to ``rank`` by leading size-1 axes (kept in front)."""
    extra = rank - len(sigma)
    return tuple(range(extra)) + tuple(extra + a for a in sigma)


def permute_const(array: np.ndarray, rank: int, sigma: Sequence[int]) -> np.ndarray:
    """A constant that broadcasts against a rank-``rank`` source tensor, re-laid out by sigma.

    Leading size-1 axes added for the permutation are dropped again where possible, so a
    (C,1,1) bias becomes (1,1,C) and keeps broadcasting the same way.
    """
    orig_rank = array.ndim
    if array.size == 1 or orig_rank == 0:
        return array
    padded = array.reshape((1,) * (rank - orig_rank) + array.shape)
    out = np.array(padded.transpose(sigma), order="C")
    while out.ndim > orig_rank and out.shape[0] == 1:
        out = out.reshape(out.shape[1:])
    return out


def reshape_groups(in_shape: Sequence[int], out_shape: Sequence[int]):
    """Pair the non-1 input axes and output axes that a reshape merges/splits into each other.

    Returns a list of (input axes, output axes), or None when the sizes do not factor.
    """
    ins = [i for i, d in enumerate(in_shape) if d != 1]
    outs = [j for j, d in enumerate(out_shape) if d != 1]
    groups = []
    i = j = 0
    while i < len(ins) and j < len(outs):
        gi, go = [ins[i]], [outs[j]]
        pi, po = in_shape[ins[i]], out_shape[outs[j]]
        i += 1
        j += 1
        while pi != po:
            if pi < po:
                if i >= len(ins):
                    return None
                pi *= in_shape[ins[i]]
                gi.append(ins[i])
                i += 1
            else:
                if j >= len(outs):
                    return None
                po *= out_shape[outs[j]]
                go.append(outs[j])
                j += 1
        groups.append((gi, go))
    if i != len(ins) or j != len(outs):
        return None
    return groups


def _group_sequence(order: list[int], groups_axes: list[list[int]]) -> list[int] | None:
    """Which group each contiguous run of ``order`` is, if order is whole groups in order."""
    owner = {a: g for g, axes in enumerate(groups_axes) for a in axes}
    seq: list[int] = []
    pos = 0
    while pos < len(order):
        g = owner[order[pos]]
        axes = groups_axes[g]
        if order[pos: pos + len(axes)] != axes:
            return None
        seq.append(g)
        pos += len(axes)
    return seq


def _derived_sigma(out_shape: Sequence[int], groups, in_seq: list[int]) -> Perm:
    """Output layout that stores the output groups in the order the input groups are stored."""
    keys: dict[int, tuple] = {}
    rank_of_group = {g: r for r, g in enumerate(in_seq)}
    for g, (_, out_axes) in enumerate(groups):
        for k, a in enumerate(out_axes):
            keys[a] = (rank_of_group[g], k, 0)
    last: tuple = (-1, 0, 0)
    for a in range(len(out_shape)):  # size-1 axes follow their source predecessor
        if a in keys:
            last = keys[a]
        else:
            keys[a] = (last[0], last[1], a + 1)
    return tuple(sorted(range(len(out_shape)), key=lambda a: keys[a]))


def reshape_preference(rank: int) -> list[Perm]:
    """The layouts a Reshape's result takes first when its bytes allow: NHWC for a rank-4
    result (an image), else the source order."""
    return ([NHWC] if rank == 4 else []) + [identity(rank)]


def reshape_layout(in_shape, sigma_in, out_shape, prefer: Sequence[Perm]) -> Perm | None:
    """A layout for the reshape's output so that reshaping the stored input is exact, or None."""
    groups = reshape_groups(in_shape, out_shape)
    if groups is None:
        return None
    in_seq = _group_sequence(nonunit_order(in_shape, sigma_in), [g[0] for g in groups])
    if in_seq is None:
        return None
    out_groups = [g[1] for g in groups]
    candidates = [tuple(p) for p in prefer if len(p) == len(out_shape)]
    candidates.append(_derived_sigma(out_shape, groups, in_seq))
    for cand in candidates:
        if _group_sequence(nonunit_order(out_shape, cand), out_groups) == in_seq:
            return cand
    return None


def drop_axes_layout(sigma: Sequence[int], dropped: set[int]) -> Perm:
    """Layout of the result when the source axes in ``dropped`` disappear (Squeeze, Reduce)."""
    kept = [a for a in range(len(sigma)) if a not in dropped]
    renumber = {a: i for i, a in enumerate(kept)}
    return tuple(renumber[a] for a in sigma if a not in dropped)


def insert_axes_layout(sigma: Sequence[int], new_axes: list[int]) -> tuple[Perm, list[int]]:
    """Unsqueeze: (output layout, positions of the new axes in the stored output)."""
    rank = len(sigma) + len(new_axes)
    old_to_new = [a for a in range(rank) if a not in new_axes]
    order = [old_to_new[a] for a in sigma]
    for a in sorted(new_axes):  # right after its source predecessor (placed already), or first
        order.insert(order.index(a - 1) + 1 if a > 0 else 0, a)
    positions = sorted(order.index(a) for a in new_axes)
    return tuple(order), positions


def flatten_row_order(src_shape: Sequence[int], sigma: Sequence[int]) -> np.ndarray:
    """For a (N, ...) tensor flattened from axis 1: source flat index of each stored position."""
    inner = [int(d) for d in src_shape[1:]]
    idx = np.arange(int(np.prod(inner, dtype=np.int64))).reshape(inner)
    return idx.transpose([a - 1 for a in sigma[1:]]).reshape(-1)
