"""Near misses of every activation idiom and affine fold.

Each pattern rewrite (passes/to_dialect/activation_idioms.py; select_ops.py's Clip / Min / Max forms
of Relu6 and LeakyRelu; the affine folds of fold_batchnorm / fuse_bias through
passes/to_dialect/affine.py) is shown once firing and then against graphs one constant, operand or
op away from it that compute something else. A near miss must not become the idiom's op nor record
its decision, and whatever it converts to must compute onnxruntime's numbers on the same inputs; the
cases a near miss leaves without a dialect form (a comparison feeding Where) are refused, and every
case says which of the two it is. A planted bug that widened a rule (Relu6 firing on
``Min(Max(x, 0), 5)``: values above 5 came out up to 6) passed the whole suite before.

Tolerance: the rewrites are exact (bit-identical); folds multiply weights in float64 and round
once (docs/rounding.md), so results are compared with rtol 1e-5 of the output's magnitude.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "frontends" / "onnx"))
from onnx_helpers import make_model, run_ort

from nhwc_onnx import api
from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.runtime import run

N = helper.make_node
SHAPE = [2, 3, 7, 5]  # NCHW: every dimension different, values spread over [-12, 12]
RNG = np.random.default_rng(23)
X = (RNG.standard_normal(SHAPE) * 4).astype(np.float32)
CONV_W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
GEMM_W = RNG.standard_normal((6, 5)).astype(np.float32)


def f32(*values, shape=None) -> np.ndarray:
    array = np.asarray(values if len(values) != 1 else values[0], np.float32)
    return array.reshape(shape) if shape is not None else array


def per_channel(*values) -> np.ndarray:
    return f32(*values, shape=(1, len(values), 1, 1))


@dataclass
class Case:
    nodes: list
    inits: dict
    fires: str | None = None  # the dialect op the idiom becomes (None: a near miss)
    decision: str | None = None  # text of the decision that records the rewrite
    must_not: tuple[str, ...] = ()  # ops and decision texts a near miss must not produce
    converts: bool = True  # False: the near miss has no dialect form and is refused
    shape: list = field(default_factory=lambda: list(SHAPE))


@dataclass
class Outcome:
    ops: dict = field(default_factory=dict)
    decisions: list = field(default_factory=list)
    refused: UnsupportedOpError | None = None


def convert_and_compare(case: Case, tmp_path: Path) -> Outcome:
    model = make_model(case.nodes, [("x", case.shape)], [("y", None)], case.inits, opset=13)
    x = X if len(case.shape) == 4 else X.reshape(2, -1)[:, :case.shape[1]].copy()
    want = run_ort(model, {"x": x})["y"]
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    try:
        result = api.convert(path, options=ConvertOptions(exact_cut=False))
    except UnsupportedOpError as exc:
        return Outcome(refused=exc)
    perms = result.model.io_permutations
    fed = np.ascontiguousarray(np.transpose(x, perms["x"])) if perms.get("x") else x
    got = run(result.model, {"x": fed})["y"]
    if perms.get("y"):
        got = np.transpose(got, np.argsort(perms["y"]))
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)
    return Outcome(result.report.target_ops, [d["detail"] for d in result.report.decisions])


def _conv(*after, inits=None) -> tuple[list, dict]:
    return [N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), *after], {"w": CONV_W,
                                                                        **(inits or {})}


def _cases() -> dict[str, Case]:
    zero, six, five = f32(0), f32(6), f32(5)
    relu6 = ("Relu6",)
    leaky = ("LeakyRelu",)
    elu = ("Elu",)
    cases = {
        # -- Relu6: Min(Max(x, 0), 6), Max(Min(x, 6), 0), Clip(0, 6), Min(Relu(x), 6)
        "relu6 min(max(x,0),6)": Case([N("Max", ["x", "lo"], ["m"]), N("Min", ["m", "hi"], ["y"])],
                                      {"lo": zero, "hi": six}, "Relu6", "min(max(x, 0), 6)"),
        "relu6 max(min(x,6),0)": Case([N("Min", ["x", "hi"], ["m"]), N("Max", ["m", "lo"], ["y"])],
                                      {"lo": zero, "hi": six}, "Relu6", "max(min(x, 6), 0)"),
        "relu6 uniform vector bound": Case(
            [N("Max", ["x", "lo"], ["m"]), N("Min", ["m", "hi"], ["y"])],
            {"lo": zero, "hi": per_channel(6, 6, 6)}, "Relu6", "min(max(x, 0), 6)"),
        "relu6 clip(0,6)": Case([N("Clip", ["x", "lo", "hi"], ["y"])], {"lo": zero, "hi": six},
                                "Relu6", "-> Relu6"),
        "relu6 min(relu(x),6)": Case([N("Relu", ["x"], ["r"]), N("Min", ["r", "hi"], ["y"])],
                                     {"hi": six}, "Relu6", "min(relu(x), 6)"),
        "near min(max(x,0),5)": Case([N("Max", ["x", "lo"], ["m"]), N("Min", ["m", "hi"], ["y"])],
                                     {"lo": zero, "hi": five}, must_not=relu6),
        "near max(min(x,5),0)": Case([N("Min", ["x", "hi"], ["m"]), N("Max", ["m", "lo"], ["y"])],
                                     {"lo": zero, "hi": five}, must_not=relu6),
        "near min(max(x,0.5),6)": Case(
            [N("Max", ["x", "lo"], ["m"]), N("Min", ["m", "hi"], ["y"])],
            {"lo": f32(0.5), "hi": six}, must_not=relu6),
        "near max(min(x,6),-1)": Case(
            [N("Min", ["x", "hi"], ["m"]), N("Max", ["m", "lo"], ["y"])],
            {"lo": f32(-1), "hi": six}, must_not=relu6),
        "near min(max(x,0),[6,6,5])": Case(
            [N("Max", ["x", "lo"], ["m"]), N("Min", ["m", "hi"], ["y"])],
            {"lo": zero, "hi": per_channel(6, 6, 5)}, must_not=relu6),
        "near min(min(x,0),6)": Case([N("Min", ["x", "lo"], ["m"]), N("Min", ["m", "hi"], ["y"])],
                                     {"lo": zero, "hi": six}, must_not=relu6),
        "near max(max(x,0),6)": Case([N("Max", ["x", "lo"], ["m"]), N("Max", ["m", "hi"], ["y"])],
                                     {"lo": zero, "hi": six}, must_not=relu6),
        "near clip(0,5)": Case([N("Clip", ["x", "lo", "hi"], ["y"])], {"lo": zero, "hi": five},
                               must_not=relu6),
        "near clip(-1,6)": Case([N("Clip", ["x", "lo", "hi"], ["y"])],
                                {"lo": f32(-1), "hi": six}, must_not=relu6),
        "near clip(-1,inf) is no Relu": Case([N("Clip", ["x", "lo"], ["y"])], {"lo": f32(-1)},
                                             must_not=("Relu",)),
        "near min(relu(x),5)": Case([N("Relu", ["x"], ["r"]), N("Min", ["r", "hi"], ["y"])],
                                    {"hi": five}, must_not=relu6),
        "near min(10*sigmoid(x),6)": Case(
            [N("Sigmoid", ["x"], ["s"]), N("Mul", ["s", "ten"], ["r"]),
             N("Min", ["r", "hi"], ["y"])], {"ten": f32(10), "hi": six}, must_not=relu6),
        # -- LeakyRelu: max(x, a*x) with 0 < a < 1, Where(x > 0, x, a*x) with any a
        "leaky max(x,0.2x)": Case([N("Mul", ["x", "a"], ["ax"]), N("Max", ["x", "ax"], ["y"])],
                                  {"a": f32(0.2)}, "LeakyRelu", "*x) -> LeakyRelu"),
        "leaky where(x>0,x,3x)": Case(
            [N("Greater", ["x", "zero"], ["p"]), N("Mul", ["x", "a"], ["ax"]),
             N("Where", ["p", "x", "ax"], ["y"])], {"zero": zero, "a": f32(3)}, "LeakyRelu",
            "where(x > 0, x, 3.0 * ...) -> LeakyRelu"),
        "near max(x,1.5x)": Case([N("Mul", ["x", "a"], ["ax"]), N("Max", ["x", "ax"], ["y"])],
                                 {"a": f32(1.5)}, must_not=leaky),
        "near max(x,2x) (scale first)": Case(
            [N("Mul", ["a", "x"], ["ax"]), N("Max", ["ax", "x"], ["y"])], {"a": f32(2)},
            must_not=leaky),
        "near max(x,[.1,.2,.3]*x)": Case(
            [N("Mul", ["x", "a"], ["ax"]), N("Max", ["x", "ax"], ["y"])],
            {"a": per_channel(0.1, 0.2, 0.3)}, must_not=leaky),
        "near max(x,[W vector]*x)": Case(
            [N("Mul", ["x", "a"], ["ax"]), N("Max", ["x", "ax"], ["y"])],
            {"a": f32(0.1, 0.3, 0.5, 0.7, 0.9, shape=(1, 1, 1, 5))}, must_not=leaky),
        "near max(x,0.2*(-x))": Case(
            [N("Neg", ["x"], ["n"]), N("Mul", ["n", "a"], ["ax"]), N("Max", ["x", "ax"], ["y"])],
            {"a": f32(0.2)}, must_not=leaky),
        "near where(x>0.5,x,0.1x)": Case(
            [N("Greater", ["x", "t"], ["p"]), N("Mul", ["x", "a"], ["ax"]),
             N("Where", ["p", "x", "ax"], ["y"])], {"t": f32(0.5), "a": f32(0.1)},
            must_not=leaky, converts=False),
        "near where(x>0,0.1x,x)": Case(
            [N("Greater", ["x", "zero"], ["p"]), N("Mul", ["x", "a"], ["ax"]),
             N("Where", ["p", "ax", "x"], ["y"])], {"zero": zero, "a": f32(0.1)},
            must_not=leaky, converts=False),
        "near where(x<0,x,0.1x)": Case(
            [N("Less", ["x", "zero"], ["p"]), N("Mul", ["x", "a"], ["ax"]),
             N("Where", ["p", "x", "ax"], ["y"])], {"zero": zero, "a": f32(0.1)},
            must_not=leaky, converts=False),
        "near where(0>x,x,0.1x)": Case(
            [N("Greater", ["zero", "x"], ["p"]), N("Mul", ["x", "a"], ["ax"]),
             N("Where", ["p", "x", "ax"], ["y"])], {"zero": zero, "a": f32(0.1)},
            must_not=leaky, converts=False),
        "near where(x>0,x,0.1*relu(x))": Case(
            [N("Greater", ["x", "zero"], ["p"]), N("Relu", ["x"], ["r"]),
             N("Mul", ["r", "a"], ["ax"]), N("Where", ["p", "x", "ax"], ["y"])],
            {"zero": zero, "a": f32(0.1)}, must_not=leaky, converts=False),
        # -- Elu: Where(x > 0, x | Elu(x), a * (Exp(x) - 1) | a * Elu(x))
        "elu where(x>0,x,0.7(exp(x)-1))": Case(
            [N("Greater", ["x", "zero"], ["p"]), N("Exp", ["x"], ["e"]),
             N("Sub", ["e", "one"], ["em"]), N("Mul", ["em", "a"], ["ae"]),
             N("Where", ["p", "x", "ae"], ["y"])], {"zero": zero, "one": f32(1), "a": f32(0.7)},
            "Elu", "-> Elu"),
        "elu where(x>0,elu(x),0.4elu(x))": Case(
            [N("Greater", ["x", "zero"], ["p"]), N("Elu", ["x"], ["e"], alpha=1.0),
             N("Mul", ["a", "e"], ["ae"]), N("Where", ["p", "e", "ae"], ["y"])],
            {"zero": zero, "a": f32(0.4)}, "Elu", "-> Elu"),
        "near exp(x)-2": Case(
            [N("Greater", ["x", "zero"], ["p"]), N("Exp", ["x"], ["e"]),
             N("Sub", ["e", "two"], ["em"]), N("Mul", ["em", "a"], ["ae"]),
             N("Where", ["p", "x", "ae"], ["y"])], {"zero": zero, "two": f32(2), "a": f32(0.7)},
            must_not=elu, converts=False),
        "near exp(x)+1": Case(
            [N("Greater", ["x", "zero"], ["p"]), N("Exp", ["x"], ["e"]),
             N("Add", ["e", "one"], ["em"]), N("Mul", ["em", "a"], ["ae"]),
             N("Where", ["p", "x", "ae"], ["y"])], {"zero": zero, "one": f32(1), "a": f32(0.7)},
            must_not=elu, converts=False),
        "near 1-exp(x)": Case(
            [N("Greater", ["x", "zero"], ["p"]), N("Exp", ["x"], ["e"]),
             N("Sub", ["one", "e"], ["em"]), N("Mul", ["em", "a"], ["ae"]),
             N("Where", ["p", "x", "ae"], ["y"])], {"zero": zero, "one": f32(1), "a": f32(0.7)},
            must_not=elu, converts=False),
        "near exp(relu(x))-1": Case(
            [N("Greater", ["x", "zero"], ["p"]), N("Relu", ["x"], ["r"]), N("Exp", ["r"], ["e"]),
             N("Sub", ["e", "one"], ["em"]), N("Mul", ["em", "a"], ["ae"]),
             N("Where", ["p", "x", "ae"], ["y"])], {"zero": zero, "one": f32(1), "a": f32(0.7)},
            must_not=elu, converts=False),
        "near where(x>0,elu_0.5(x),0.4elu_0.5(x))": Case(
            [N("Greater", ["x", "zero"], ["p"]), N("Elu", ["x"], ["e"], alpha=0.5),
             N("Mul", ["a", "e"], ["ae"]), N("Where", ["p", "e", "ae"], ["y"])],
            {"zero": zero, "a": f32(0.4)}, must_not=elu, converts=False),
        # -- PRelu: Relu(x) + s * Relu(-x), s one value per channel
        "prelu relu(x)+s*relu(-x)": Case(
            [N("Relu", ["x"], ["p"]), N("Neg", ["x"], ["n"]), N("Relu", ["n"], ["rn"]),
             N("Mul", ["s", "rn"], ["q"]), N("Add", ["p", "q"], ["y"])],
            {"s": per_channel(-0.1, -0.2, -0.3)}, "PRelu", "relu(x) + s * relu(-x) -> PRelu"),
        "near relu(x)+s*relu(x)": Case(
            [N("Relu", ["x"], ["p"]), N("Relu", ["x"], ["rn"]), N("Mul", ["s", "rn"], ["q"]),
             N("Add", ["p", "q"], ["y"])], {"s": per_channel(-0.1, -0.2, -0.3)},
            must_not=("PRelu",)),
        "near relu(x)+s*sigmoid(-x)": Case(
            [N("Relu", ["x"], ["p"]), N("Neg", ["x"], ["n"]), N("Sigmoid", ["n"], ["rn"]),
             N("Mul", ["s", "rn"], ["q"]), N("Add", ["p", "q"], ["y"])],
            {"s": per_channel(-0.1, -0.2, -0.3)}, must_not=("PRelu",)),
        "near relu(x)+s*relu(-x), s per position": Case(
            [N("Relu", ["x"], ["p"]), N("Neg", ["x"], ["n"]), N("Relu", ["n"], ["rn"]),
             N("Mul", ["s", "rn"], ["q"]), N("Add", ["p", "q"], ["y"])],
            {"s": -RNG.uniform(0.1, 0.5, (1, 3, 7, 5)).astype(np.float32)},
            must_not=("PRelu",)),
        "near relu(x)+s*relu(-relu(x))": Case(
            [N("Relu", ["x"], ["p"]), N("Relu", ["x"], ["r2"]), N("Neg", ["r2"], ["n"]),
             N("Relu", ["n"], ["rn"]), N("Mul", ["s", "rn"], ["q"]), N("Add", ["p", "q"], ["y"])],
            {"s": per_channel(-0.1, -0.2, -0.3)}, must_not=("PRelu",)),
    }
    # -- affine folds: a per-channel Mul / Add / Sub after Conv or Gemm goes into its weights
    ch = per_channel(1.5, -2, 0.5, 3)
    folds = {
        "fold conv*channel": Case(*_conv(N("Mul", ["c", "k"], ["y"]), inits={"k": ch}),
                                  fires="Conv", decision="Mul folded into Conv"),
        "fold conv*scalar": Case(*_conv(N("Mul", ["c", "k"], ["y"]), inits={"k": f32(1.5)}),
                                 fires="Conv", decision="Mul folded into Conv"),
        "fold conv+channel": Case(*_conv(N("Add", ["c", "k"], ["y"]), inits={"k": ch}),
                                  fires="Conv", decision="Add of a channel vector fused"),
        "fold conv-channel": Case(*_conv(N("Sub", ["c", "k"], ["y"]), inits={"k": ch}),
                                  fires="Conv", decision="Sub of a channel vector fused"),
        "fold gemm+column": Case([N("Gemm", ["x", "g"], ["c"], transB=1),
                                  N("Add", ["c", "k"], ["y"])],
                                 {"g": GEMM_W, "k": np.arange(6, dtype=np.float32)},
                                 fires="Dense", decision="Add of a channel vector fused",
                                 shape=[2, 5]),
        "fold gemm*column": Case([N("Gemm", ["x", "g"], ["c"], transB=1),
                                  N("Mul", ["c", "k"], ["y"])],
                                 {"g": GEMM_W, "k": np.arange(1, 7, dtype=np.float32)},
                                 fires="Dense", decision="Mul folded into Gemm", shape=[2, 5]),
        "near channel-conv (reversed Sub)": Case(
            *_conv(N("Sub", ["k", "c"], ["y"]), inits={"k": ch}),
            must_not=("fused into the bias", "folded into Conv")),
        "near conv/channel (Div)": Case(*_conv(N("Div", ["c", "k"], ["y"]), inits={"k": ch}),
                                        must_not=("folded into Conv", "fused into the bias")),
        "near conv*row vector (H axis)": Case(
            *_conv(N("Mul", ["c", "k"], ["y"]),
                   inits={"k": RNG.uniform(0.5, 2, (1, 1, 7, 1)).astype(np.float32)}),
            must_not=("folded into Conv",)),
        "near conv+per-position": Case(
            *_conv(N("Add", ["c", "k"], ["y"]),
                   inits={"k": RNG.standard_normal((1, 4, 7, 5)).astype(np.float32)}),
            must_not=("fused into the bias",)),
        "near conv*channel, conv read twice": Case(
            *_conv(N("Mul", ["c", "k"], ["m"]), N("Add", ["m", "c"], ["y"]), inits={"k": ch}),
            must_not=("folded into Conv",)),
        "near conv+channel, conv read twice": Case(
            *_conv(N("Add", ["c", "k"], ["m"]), N("Mul", ["m", "c"], ["y"]), inits={"k": ch}),
            must_not=("fused into the bias",)),
        "near gemm+row vector": Case([N("Gemm", ["x", "g"], ["c"], transB=1),
                                      N("Add", ["c", "k"], ["y"])],
                                     {"g": GEMM_W, "k": f32(1, 2, shape=(2, 1))},
                                     must_not=("fused into the bias",), shape=[2, 5]),
        "near gemm*row vector": Case([N("Gemm", ["x", "g"], ["c"], transB=1),
                                      N("Mul", ["c", "k"], ["y"])],
                                     {"g": GEMM_W, "k": f32(1.5, 2, shape=(2, 1))},
                                     must_not=("folded into Gemm",), shape=[2, 5]),
    }
    return {**cases, **folds}


CASES = _cases()
FIRING = [name for name, case in CASES.items() if case.fires]
NEAR = [name for name, case in CASES.items() if not case.fires]


@pytest.mark.parametrize("name", FIRING)
def test_idiom_fires_on_its_exact_form(name, tmp_path):
    """The positive controls: without them a near miss could pass because nothing fires."""
    case = CASES[name]
    outcome = convert_and_compare(case, tmp_path)
    assert outcome.refused is None, outcome.refused
    assert case.fires in outcome.ops, outcome.ops
    assert any(case.decision in d for d in outcome.decisions), outcome.decisions


@pytest.mark.parametrize("name", NEAR)
def test_near_miss_does_not_fire(name, tmp_path):
    case = CASES[name]
    outcome = convert_and_compare(case, tmp_path)
    if not case.converts:
        assert outcome.refused is not None, f"converted to {outcome.ops}"
        refused_ops = {p.op for p in outcome.refused.problems}
        assert refused_ops & {"Greater", "Less", "Where"}, outcome.refused
        return
    assert outcome.refused is None, outcome.refused
    for forbidden in case.must_not:
        assert forbidden not in outcome.ops, (forbidden, outcome.ops)
        assert not any(forbidden in d for d in outcome.decisions), outcome.decisions


def test_how_many_near_misses_convert():
    """Every near miss either converts (checked against onnxruntime above) or is refused for
    its comparison; the split is fixed so a rule that starts refusing shows."""
    assert len(FIRING) == 16
    assert (sum(CASES[n].converts for n in NEAR), sum(not CASES[n].converts for n in NEAR)) \
        == (29, 10)
