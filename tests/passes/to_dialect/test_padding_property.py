"""Padding proofs, property-tested: for every sampled source configuration the dialect passes
either produce a model whose output equals a brute-force numpy reference of the source
convention (run through nhwc_onnx.runtime, max abs error <= 1e-5) or refuse. Never a wrong
answer. Conventions: ONNX (explicit pads, ceil_mode, count_include_pad, auto_pad), Caffe
(floor conv, ceil pooling with clipped last window, AVE dividing by the window clipped to
input + pad), TensorFlow (SAME / VALID, explicit Pad before a VALID conv)."""
from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st

from tests.passes.dialect_oracles import (
    Builder,
    caffe_pool_out,
    conv_ref,
    convert,
    convert_or_refuse,
    max_err,
    onnx_pool_out,
    pool_ref,
    rand,
    run_dialect,
    tf_same,
)

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-5
N, C = 2, 3


def _resolve(i, k, s, d, pb, pe, auto_pad):
    """Source pads (begin, end) and conv output size, from the ONNX definitions."""
    e = (k - 1) * d + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        o, small, big = tf_same(i, k, s, d)
        return (small, big, o) if auto_pad == "SAME_UPPER" else (big, small, o)
    if auto_pad == "VALID":
        return 0, 0, -(-(i - e + 1) // s)
    return pb, pe, (i + pb + pe - e) // s + 1


axis = st.tuples(st.integers(1, 9), st.integers(1, 4), st.integers(1, 3), st.integers(1, 2),
                 st.integers(0, 3), st.integers(0, 3))
auto_pads = st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])


@SETTINGS
@given(h=axis, w=axis, auto_pad=auto_pads, group=st.sampled_from([1, 3]))
# stride 2 even/odd
@example(h=(8, 3, 2, 1, 1, 1), w=(7, 3, 2, 1, 1, 1), auto_pad="NOTSET", group=1)
@example(h=(7, 1, 3, 1, 0, 0), w=(6, 2, 3, 1, 0, 0), auto_pad="NOTSET", group=1)  # kernel < stride
@example(h=(9, 3, 1, 2, 2, 2), w=(8, 3, 2, 2, 2, 2), auto_pad="NOTSET", group=3)  # dilation 2
@example(h=(3, 3, 1, 1, 0, 0), w=(4, 4, 2, 1, 0, 0), auto_pad="NOTSET", group=1)  # 1x1 output
def test_onnx_conv_always_exact(h, w, auto_pad, group):
    sizes, plans = [], []
    for i, k, s, d, pb, pe in (h, w):
        b, e, o = _resolve(i, k, s, d, pb, pe, auto_pad)
        assume(o >= 1)
        sizes.append(o)
        plans.append((b, e))
    m = 2 * group
    weight = rand(m, C // group, h[1], w[1])
    bias = rand(m)
    b = Builder((N, h[0], w[0], C))
    y = b.op("Conv", [b.x, b.const(weight, "W"), b.const(bias, "B")], (N, *sizes, m),
             kernel_shape=[h[1], w[1]], strides=[h[2], w[2]], dilations=[h[3], w[3]],
             pads=[h[4], w[4], h[5], w[5]], auto_pad=auto_pad, group=group, data_format="NHWC")
    model = b.model(y)
    convert(model)  # a zero-padded conv always has an exact form
    x = rand(N, h[0], w[0], C)
    pads = (plans[0][0], plans[1][0], plans[0][1], plans[1][1])
    ref = conv_ref(x.astype(float), weight.astype(float), bias, (h[2], w[2]), (h[3], w[3]),
                   pads, group)
    ref = ref[:, :sizes[0], :sizes[1]]
    assert max_err(run_dialect(model, x), ref) <= TOL


pool_axis = st.tuples(st.integers(1, 9), st.integers(1, 4), st.integers(1, 3),
                      st.integers(0, 2), st.integers(0, 2))


def _pool_model(kind, h, w, ceil_mode, cip, auto_pad, relu, dil=1):
    """A core pool on (N,H,W,C) (after a Relu when ``relu``); None when the output is empty."""
    outs, plans = [], []
    for i, k, s, pb, pe in (h, w):
        if auto_pad == "NOTSET":
            o = onnx_pool_out(i, k, s, dil, pb, pe, ceil_mode)
        else:
            pb, pe, o = _resolve(i, k, s, dil, pb, pe, auto_pad)
        if o < 1 or pb >= k or pe >= k:
            return None
        outs.append(o)
        plans.append((pb, pe))
    b = Builder((N, h[0], w[0], C))
    src = b.op("Relu", [b.x], (N, h[0], w[0], C)) if relu else b.x
    op = "MaxPool" if kind == "max" else "AveragePool"
    extra = {"count_include_pad": cip} if kind == "avg" else {"dilations": [dil, dil]}
    y = b.op(op, [src], (N, *outs, C), kernel_shape=[h[1], w[1]], strides=[h[2], w[2]],
             pads=[h[3], w[3], h[4], w[4]], auto_pad=auto_pad, ceil_mode=ceil_mode,
             data_format="NHWC", **extra)
    return b.model(y), outs, plans


def _check_pool(kind, h, w, model, outs, plans, cip, relu, dil=1, **options):
    ctx = convert_or_refuse(model, **options)
    prefix = "approximate " if options else ""
    event(f"{prefix}{kind}: " + ("refused" if ctx is None else " ".join(
        str(d.data.get("choice", "legalised")) for d in ctx.decisions if d.kind == "padding")))
    if ctx is None:
        return False
    x = rand(N, h[0], w[0], C)
    xin = x.clip(0) if relu else x
    extent = None
    if kind == "avg" and cip:
        extent = ((-plans[0][0], h[0] + plans[0][1]), (-plans[1][0], w[0] + plans[1][1]))
    ref = pool_ref(xin.astype(float), kind, (h[1], w[1]), (h[2], w[2]),
                   (plans[0][0], plans[1][0]), outs, extent, (dil, dil))
    assert max_err(run_dialect(model, x), ref) <= TOL
    return True


@SETTINGS
@given(kind=st.sampled_from(["max", "avg"]), h=pool_axis, w=pool_axis,
       ceil_mode=st.sampled_from([0, 1]), cip=st.sampled_from([0, 1]), auto_pad=auto_pads,
       relu=st.booleans(), dil=st.sampled_from([1, 1, 2]))
@example(kind="avg", h=(8, 3, 2, 1, 1), w=(7, 3, 2, 1, 1), ceil_mode=0, cip=0, auto_pad="NOTSET",
         relu=False, dil=1)
@example(kind="max", h=(7, 1, 3, 0, 0), w=(6, 2, 3, 0, 0), ceil_mode=1, cip=0, auto_pad="NOTSET",
         relu=True, dil=1)
@example(kind="max", h=(3, 3, 1, 0, 0), w=(2, 2, 2, 0, 0), ceil_mode=0, cip=0, auto_pad="VALID",
         relu=False, dil=1)
@example(kind="max", h=(9, 3, 2, 1, 1), w=(8, 2, 1, 0, 1), ceil_mode=1, cip=0, auto_pad="NOTSET",
         relu=True, dil=2)  # dilation 2
def test_onnx_pool_exact_or_refused(kind, h, w, ceil_mode, cip, auto_pad, relu, dil):
    dil = dil if kind == "max" else 1  # average pooling has no dilation in the core op set
    built = _pool_model(kind, h, w, ceil_mode, cip, auto_pad, relu, dil)
    assume(built is not None)
    model, outs, plans = built
    converted = _check_pool(kind, h, w, model, outs, plans, cip, relu, dil)
    if converted and kind == "avg":
        # --strict keeps exactly the forms that need no divisor-ratio map (rounding-level).
        model, outs, plans = _pool_model(kind, h, w, ceil_mode, cip, auto_pad, relu)
        ctx = convert_or_refuse(model)
        ratio = any(d.kind == "rounding" for d in ctx.decisions)
        model, outs, plans = _pool_model(kind, h, w, ceil_mode, cip, auto_pad, relu)
        assert (convert_or_refuse(model, strict=True) is None) == ratio
    if auto_pad in ("SAME_UPPER", "VALID") and not (kind == "avg" and cip) and dil == 1:
        assert converted, "TF SAME / VALID pooling must always convert"


def test_caffe_pool_exact_or_refused():
    """Caffe: pads p on both sides, ceil rounding, AVE divides by the window clipped to
    input + pad (count_include_pad 1). Every such pool has an exact dialect form."""
    outcomes = Counter()

    @SETTINGS
    @given(kind=st.sampled_from(["max", "avg"]), h=st.tuples(st.integers(1, 9), st.integers(1, 4),
           st.integers(1, 3), st.integers(0, 2)), w=st.tuples(st.integers(1, 9),
           st.integers(1, 4), st.integers(1, 3), st.integers(0, 2)), relu=st.booleans())
    @example(kind="max", h=(7, 3, 2, 0), w=(6, 3, 2, 0), relu=False)  # GoogLeNet-style, odd/even
    @example(kind="avg", h=(6, 3, 2, 1), w=(5, 3, 2, 1), relu=False)
    def case(kind, h, w, relu):
        outs = []
        for i, k, s, p in (h, w):
            assume(p < k and i + 2 * p >= k)
            o = caffe_pool_out(i, k, s, p)
            # Caffe keeps a last window starting past the input when pad is 0 (an empty
            # window): the core op's rule drops it; such models are degenerate, not sampled.
            assume(o == onnx_pool_out(i, k, s, 1, p, p, 1))
            outs.append(o)
        b = Builder((N, h[0], w[0], C))
        src = b.op("Relu", [b.x], (N, h[0], w[0], C)) if relu else b.x
        op = "MaxPool" if kind == "max" else "AveragePool"
        extra = {"count_include_pad": 1} if kind == "avg" else {}
        y = b.op(op, [src], (N, *outs, C), kernel_shape=[h[1], w[1]], strides=[h[2], w[2]],
                 pads=[h[3], w[3], h[3], w[3]], ceil_mode=1, data_format="NHWC", **extra)
        model = b.model(y)
        plans = [(h[3], h[3]), (w[3], w[3])]
        outcomes[kind, _check_pool(kind, h, w, model, outs, plans, 1, relu)] += 1

    case()
    # Refusing everything would pass the exactness checks: count what converted. Every
    # sampled Caffe pool converts (AVE pools whose divisor changes at the clipped end convert
    # through the divisor-ratio map by default); ~40 cases run.
    assert outcomes["max", False] == outcomes["avg", False] == 0, dict(outcomes)
    assert outcomes["max", True] + outcomes["avg", True] >= 30, dict(outcomes)
    assert outcomes["max", True] >= 1 and outcomes["avg", True] >= 1, dict(outcomes)


@SETTINGS
@given(h=st.tuples(st.integers(1, 9), st.integers(1, 4), st.integers(1, 3), st.integers(1, 2)),
       w=st.tuples(st.integers(1, 9), st.integers(1, 4), st.integers(1, 3), st.integers(1, 2)))
def test_caffe_conv_floor_exact(h, w):
    """Caffe convolution: symmetric pad, floor rounding, dilation."""
    sizes = []
    for i, k, s, d in (h, w):
        p = k // 2
        o = (i + 2 * p - ((k - 1) * d + 1)) // s + 1
        assume(o >= 1)
        sizes.append(o)
    weight = rand(4, C, h[1], w[1])
    b = Builder((N, h[0], w[0], C))
    y = b.op("Conv", [b.x, b.const(weight, "W")], (N, *sizes, 4), kernel_shape=[h[1], w[1]],
             strides=[h[2], w[2]], dilations=[h[3], w[3]],
             pads=[h[1] // 2, w[1] // 2, h[1] // 2, w[1] // 2], data_format="NHWC")
    model = b.model(y)
    convert(model)
    x = rand(N, h[0], w[0], C)
    ref = conv_ref(x, weight, None, (h[2], w[2]), (h[3], w[3]),
                   (h[1] // 2, w[1] // 2, h[1] // 2, w[1] // 2))
    assert max_err(run_dialect(model, x), ref) <= TOL


tf_axis = st.tuples(st.integers(1, 9), st.integers(1, 4), st.integers(1, 3), st.integers(1, 2))


@SETTINGS
@given(h=tf_axis, w=tf_axis, padding=st.sampled_from(["SAME", "VALID"]),
       op=st.sampled_from(["Conv", "MaxPool", "AveragePool"]))
def test_tf_same_valid_always_exact(h, w, padding, op):
    """TF: SAME / VALID convert for every op; pools read real cells only."""
    outs, begins = [], []
    pool = op != "Conv"
    for i, k, s, d in (h, w):
        d = 1 if pool else d
        o, bgn, _ = tf_same(i, k, s, d) if padding == "SAME" else (
            -(-(i - (k - 1) * d) // s), 0, 0)
        assume(o >= 1)
        outs.append(o)
        begins.append(bgn)
    b = Builder((N, h[0], w[0], C))
    auto = "SAME_UPPER" if padding == "SAME" else "VALID"
    x = rand(N, h[0], w[0], C)
    if pool:
        y = b.op(op, [b.x], (N, *outs, C), kernel_shape=[h[1], w[1]], strides=[h[2], w[2]],
                 auto_pad=auto, data_format="NHWC")
        kind = "max" if op == "MaxPool" else "avg"
        ref = pool_ref(x.astype(float), kind, (h[1], w[1]), (h[2], w[2]), begins, outs)
    else:
        weight = rand(h[1], w[1], C, 2)  # TF HWIO
        y = b.op("Conv", [b.x, b.const(weight, "W")], (N, *outs, 2), kernel_shape=[h[1], w[1]],
                 strides=[h[2], w[2]], dilations=[h[3], w[3]], auto_pad=auto,
                 weight_layout="HWIO", data_format="NHWC")
        total = [(o - 1) * s + (k - 1) * d + 1 - i for o, (i, k, s, d) in zip(outs, (h, w))]
        ends = [max(t, 0) - bg for t, bg in zip(total, begins)]
        ref = conv_ref(x, weight.transpose(3, 2, 0, 1), None, (h[2], w[2]), (h[3], w[3]),
                       (begins[0], begins[1], max(ends[0], 0), max(ends[1], 0)))
        ref = ref[:, :outs[0], :outs[1]]
    model = b.model(y)
    convert(model)
    assert max_err(run_dialect(model, x), ref) <= TOL


@SETTINGS
@given(h=st.tuples(st.integers(2, 9), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2),
                   st.integers(0, 2)),
       w=st.tuples(st.integers(2, 9), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2),
                   st.integers(0, 2)))
@example(h=(8, 3, 2, 0, 1), w=(7, 3, 2, 1, 1))  # Keras ZeroPadding2D(((0,1),(1,1))) + stride 2
def test_tf_explicit_pad_then_valid_conv(h, w):
    """TF/Keras: a zero Pad node before a VALID conv; merged into SAME when exact."""
    padded = [h[0] + h[3] + h[4], w[0] + w[3] + w[4]]
    outs = [(p - k) // s + 1 for p, (i, k, s, _, _) in zip(padded, (h, w))]
    assume(min(outs) >= 1)
    weight = rand(2, C, h[1], w[1])
    b = Builder((N, h[0], w[0], C))
    p = b.op("Pad", [b.x], (N, *padded, C), pads=[0, h[3], w[3], 0, 0, h[4], w[4], 0])
    y = b.op("Conv", [p, b.const(weight, "W")], (N, *outs, 2), kernel_shape=[h[1], w[1]],
             strides=[h[2], w[2]], auto_pad="VALID", data_format="NHWC")
    model = b.model(y)
    ctx = convert(model)
    x = rand(N, h[0], w[0], C)
    ref = conv_ref(x, weight, None, (h[2], w[2]), (1, 1), (h[3], w[3], h[4], w[4]))
    assert max_err(run_dialect(model, x), ref) <= TOL
    same = all(tf_same(i, k, s)[1] == pb and tf_same(i, k, s)[0] == o
               for (i, k, s, pb, _), o in zip((h, w), outs))
    if same:
        ops = [n.op for n in model.graph.nodes]
        assert ops == ["Conv"] and model.graph.nodes[0].attrs["pads"] == "SAME", ops
        assert any(d.data.get("merged_pad") for d in ctx.decisions)
