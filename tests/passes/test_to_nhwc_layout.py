"""Property tests of the layout algebra behind NCHW -> NHWC, checked with numpy data movement."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nhwc_onnx.passes.layout.perm import (
    NHWC,
    drop_axes_layout,
    flatten_row_order,
    identity,
    insert_axes_layout,
    permute_const,
    reshape_layout,
    stored_shape,
    transpose_between,
)

dims = st.integers(1, 4)


@st.composite
def shape_and_perm(draw, min_rank=2, max_rank=5):
    shape = tuple(draw(st.lists(dims, min_size=min_rank, max_size=max_rank)))
    perm = tuple(draw(st.permutations(range(len(shape)))))
    return shape, perm


@st.composite
def reshape_case(draw):
    shape, perm = draw(shape_and_perm())
    # target: merge some neighbouring axes, split others into two factors
    out, i = [], 0
    while i < len(shape):
        if i + 1 < len(shape) and draw(st.booleans()):
            out.append(shape[i] * shape[i + 1])
            i += 2
        elif shape[i] == 4 and draw(st.booleans()):
            out += [2, 2]
            i += 1
        else:
            out.append(shape[i])
            i += 1
    if draw(st.booleans()):
        out.insert(draw(st.integers(0, len(out))), 1)
    return shape, perm, tuple(out)


@settings(max_examples=120, deadline=None)
@given(reshape_case())
def test_reshape_layout_reshapes_the_stored_bytes_exactly(case):
    shape, sigma, out_shape = case
    x = np.arange(int(np.prod(shape))).reshape(shape)
    sigma_out = reshape_layout(shape, sigma, out_shape, [identity(len(out_shape))])
    if sigma_out is None:
        return
    stored_in = x.transpose(sigma)
    stored_out = stored_in.reshape(stored_shape(out_shape, sigma_out))
    np.testing.assert_array_equal(stored_out, x.reshape(out_shape).transpose(sigma_out))


def test_channel_shuffle_and_flatten_of_pooled_maps_have_layouts():
    assert reshape_layout((1, 6, 5, 7), NHWC, (1, 3, 2, 5, 7), []) == (0, 3, 4, 1, 2)
    assert reshape_layout((1, 2, 3, 5, 7), (0, 3, 4, 2, 1), (1, 6, 5, 7), [NHWC]) is None
    assert reshape_layout((1, 2, 3, 5, 7), (0, 3, 4, 1, 2), (1, 6, 5, 7), [NHWC]) == NHWC
    assert reshape_layout((2, 6, 1, 1), NHWC, (2, 6), [(0, 1)]) == (0, 1)
    assert reshape_layout((2, 6, 5, 7), NHWC, (2, 210), [(0, 1)]) is None


@settings(max_examples=100, deadline=None)
@given(shape_and_perm(), st.data())
def test_drop_and_insert_axes(case, data):
    shape, sigma = case
    x = np.arange(int(np.prod(shape))).reshape(shape)
    drop = set(data.draw(st.lists(st.integers(0, len(shape) - 1), max_size=2)))
    kept = tuple(a for a in range(len(shape)) if a not in drop)
    reduced = x.sum(axis=tuple(drop)) if drop else x
    stored_reduced = (x.transpose(sigma).sum(axis=tuple(i for i, a in enumerate(sigma)
                                                        if a in drop))
                      if drop else x.transpose(sigma))
    out_sigma = drop_axes_layout(sigma, drop)
    assert len(out_sigma) == len(kept)
    np.testing.assert_array_equal(stored_reduced, reduced.transpose(out_sigma))
    rank = len(shape) + 1
    new_axis = data.draw(st.integers(0, rank - 1))
    out_sigma, positions = insert_axes_layout(sigma, [new_axis])
    expanded = np.expand_dims(x, new_axis)
    np.testing.assert_array_equal(np.expand_dims(x.transpose(sigma), positions[0]),
                                  expanded.transpose(out_sigma))


@settings(max_examples=100, deadline=None)
@given(shape_and_perm(min_rank=3, max_rank=4), st.data())
def test_permuted_constants_broadcast_the_same(case, data):
    shape, sigma = case
    rank = len(shape)
    keep = data.draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
    const_shape = tuple(d if k else 1 for d, k in zip(shape, keep))
    drop_lead = data.draw(st.integers(0, rank - 1))
    while drop_lead and const_shape[0] == 1:
        const_shape, drop_lead = const_shape[1:], drop_lead - 1
    x = np.random.default_rng(0).normal(size=shape)
    c = np.random.default_rng(1).normal(size=const_shape)
    got = x.transpose(sigma) + permute_const(c, rank, sigma)
    np.testing.assert_allclose(got, (x + c).transpose(sigma))


def test_transpose_between_and_flatten_order():
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    stored = x.transpose(NHWC)
    assert np.array_equal(stored.transpose(transpose_between(NHWC, identity(4))), x)
    order = flatten_row_order(x.shape, NHWC)
    np.testing.assert_array_equal(stored.reshape(2, -1), x.reshape(2, -1)[:, order])
