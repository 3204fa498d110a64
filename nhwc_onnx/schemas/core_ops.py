"""The core op set: what every frontend emits (domain ``core``).

Core ops keep the full meaning of the source. Semantics are those of the standard ONNX operator
of the same name (opset 13+ forms, with every parameter an attribute once it is constant), plus
the extensions written below. Frontends never decide SAME/VALID, fold, or pick dialect ops: the
passes do.

Conventions shared by all core ops
- ``data_format`` ("NCHW" or "NHWC") on spatial ops says which axes of the rank-4 input are
  H, W and C. Spatial attributes (kernel_shape, strides, dilations, pads) always list H then W.
- ``pads`` on Conv/Pool/ConvTranspose is explicit per side: [h_begin, w_begin, h_end, w_end].
- ``auto_pad``: "NOTSET" (use ``pads``), "SAME_UPPER" (TensorFlow SAME: the odd pixel at the
  end), "SAME_LOWER" (odd pixel at the begin), "VALID". The static-shapes pass resolves
  SAME_* into explicit pads once input shapes are known.
- Axis attributes (``axis``, ``axes``, ``perm``) are in the source's own axis order; the
  NCHW->NHWC pass remaps them. A negative axis counts from the end.
- Elementwise binary ops broadcast like numpy.
"""
from __future__ import annotations

from .base import CORE_OPS, Attr, AttrKind, LayoutClass, OpSchema, Port

A = AttrKind
ANY = ("float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool")
FLOATS = ("float32", "float16", "float64")
INT_T = ("int64", "int32")

FORMAT = Attr(A.STRING, default="NCHW", allowed=("NCHW", "NHWC"),
              doc="which axes of the rank-4 input are H, W, C")
AUTO_PAD = Attr(A.STRING, default="NOTSET", allowed=("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
PADS = Attr(A.INTS, default=None, doc="[h_begin, w_begin, h_end, w_end]")


def _op(name, doc, inputs, outputs=("Y",), attrs=None, layout=LayoutClass.TRANSPARENT, dtypes=ANY):
    ins = []
    for spec in inputs:
        optional = spec.endswith("?")
        variadic = spec.endswith("*")
        ins.append(Port(spec.rstrip("?*"), optional=optional, variadic=variadic, dtypes=dtypes))
    outs = [Port(o, dtypes=dtypes) for o in outputs]
    return CORE_OPS.register(OpSchema(name, "core", doc, ins, outs, dict(attrs or {}), layout))


# -- convolution and pooling -------------------------------------------------------------------
_CONV_ATTRS = {
    "kernel_shape": Attr(A.INTS, required=True),
    "strides": Attr(A.INTS, default=[1, 1]),
    "dilations": Attr(A.INTS, default=[1, 1]),
    "group": Attr(A.INT, default=1),
    "pads": PADS,
    "auto_pad": AUTO_PAD,
    "data_format": FORMAT,
}
_op("Conv", "2-D convolution, zero padding. weight_layout 'OIHW' = (M, C/group, kH, kW) as ONNX "
    "and Caffe store it; 'HWIO' = (kH, kW, C/group, M) as TensorFlow stores it (a TF depthwise "
    "filter (kH,kW,C,mult) is the HWIO filter (kH,kW,1,C*mult) with group=C).",
    ["X", "W", "B?"], attrs={**_CONV_ATTRS,
                             "weight_layout": Attr(A.STRING, default="OIHW", allowed=("OIHW", "HWIO"))},
    layout=LayoutClass.IMPLICIT)
_op("ConvTranspose", "ONNX ConvTranspose-11 (seed 002). pads = per-side crops of the full "
    "output; output_padding adds zeros at the end. With output_shape ([oH, oW]) and auto_pad "
    "SAME_UPPER the odd crop goes to the end (TensorFlow conv2d_transpose SAME), SAME_LOWER to "
    "the begin. weight_layout 'IOHW' = (C, M/group, kH, kW) (ONNX, Caffe); 'HWOI' = (kH, kW, M, C) "
    "(TensorFlow).",
    ["X", "W", "B?"], attrs={**_CONV_ATTRS,
                             "output_padding": Attr(A.INTS, default=[0, 0]),
                             "output_shape": Attr(A.INTS),
                             "weight_layout": Attr(A.STRING, default="IOHW", allowed=("IOHW", "HWOI"))},
    layout=LayoutClass.IMPLICIT)
_POOL_ATTRS = {
    "kernel_shape": Attr(A.INTS, required=True),
    "strides": Attr(A.INTS, default=[1, 1]),
    "pads": PADS,
    "auto_pad": AUTO_PAD,
    "ceil_mode": Attr(A.INT, default=0, allowed=(0, 1),
                      doc="1: output size rounds up; a window must start inside input + begin pad "
                          "(Caffe, ONNX and PyTorch agree)"),
    "data_format": FORMAT,
}
_op("MaxPool", "Max pooling; padded cells never win.", ["X"],
    attrs={**_POOL_ATTRS, "dilations": Attr(A.INTS, default=[1, 1])}, layout=LayoutClass.IMPLICIT)
_op("AveragePool", "Average pooling. count_include_pad=0: divide by the real cells in the "
    "window. count_include_pad=1: divide by the window clipped to the padded extent "
    "[-pad_begin, size + pad_end) (Caffe AVE, PyTorch, ONNX).", ["X"],
    attrs={**_POOL_ATTRS, "count_include_pad": Attr(A.INT, default=0, allowed=(0, 1))},
    layout=LayoutClass.IMPLICIT)
_op("GlobalAveragePool", "Mean over H and W, keeping them as size 1.", ["X"],
    attrs={"data_format": FORMAT}, layout=LayoutClass.IMPLICIT)
_op("GlobalMaxPool", "Max over H and W, keeping them as size 1.", ["X"],
    attrs={"data_format": FORMAT}, layout=LayoutClass.IMPLICIT)
_op("BatchNormalization", "Inference batch norm: scale*(X-mean)/sqrt(var+epsilon)+B along "
    "``axis`` (the channel axis in the source layout).", ["X", "scale", "B", "mean", "var"],
    attrs={"epsilon": Attr(A.FLOAT, default=1e-5), "axis": Attr(A.INT, default=1)},
    layout=LayoutClass.ATTRIBUTE)
_op("Resize", "ONNX Resize-13 on the given axes: exactly one of scales (per axis) or sizes.",
    ["X"], attrs={
        "mode": Attr(A.STRING, default="nearest", allowed=("nearest", "linear")),
        "scales": Attr(A.FLOATS), "sizes": Attr(A.INTS),
        "coordinate_transformation_mode": Attr(A.STRING, default="half_pixel", allowed=(
            "half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
            "tf_half_pixel_for_nn")),
        "nearest_mode": Attr(A.STRING, default="round_prefer_floor", allowed=(
            "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")),
    }, layout=LayoutClass.ATTRIBUTE)
_op("SpaceToDepth", "out channel index (bi*bs + bj)*C + c, as both TF and ONNX define it.", ["X"],
    attrs={"blocksize": Attr(A.INT, required=True), "data_format": FORMAT},
    layout=LayoutClass.IMPLICIT)
_op("DepthToSpace", "ONNX DepthToSpace; TensorFlow's is mode DCR.", ["X"],
    attrs={"blocksize": Attr(A.INT, required=True),
           "mode": Attr(A.STRING, default="DCR", allowed=("DCR", "CRD")), "data_format": FORMAT},
    layout=LayoutClass.IMPLICIT)

# -- elementwise -------------------------------------------------------------------------------
for _name in ("Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Sqrt", "Rsqrt", "Reciprocal", "Exp",
              "Log", "Square", "Softplus", "Erf", "HardSwish", "Identity", "Dropout", "Floor",
              "Ceil", "Round", "Sign", "Not"):
    _op(_name, f"Elementwise {_name} (ONNX semantics; Rsqrt = 1/sqrt, Square = x*x; Dropout and "
        "Identity pass their input through at inference).", ["X"])
_op("Elu", "Elementwise ELU.", ["X"], attrs={"alpha": Attr(A.FLOAT, default=1.0)})
_op("LeakyRelu", "Elementwise leaky ReLU.", ["X"], attrs={"alpha": Attr(A.FLOAT, default=0.01)})
_op("HardSigmoid", "max(0, min(1, alpha*x + beta)).", ["X"],
    attrs={"alpha": Attr(A.FLOAT, default=0.2), "beta": Attr(A.FLOAT, default=0.5)})
_op("Clip", "min(max(x, min), max); an absent bound is unbounded.", ["X"],
    attrs={"min": Attr(A.FLOAT), "max": Attr(A.FLOAT)})
_op("PRelu", "x if x >= 0 else slope*x, slope broadcast to X (unidirectional).", ["X", "slope"])
for _name in ("Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "SquaredDifference", "Equal",
              "Less", "Greater", "And", "Or"):
    _op(_name, f"Elementwise {_name} with numpy broadcasting.", ["A", "B"], outputs=("C",))
for _name in ("Sum", "Mean"):
    _op(_name, f"Elementwise variadic {_name} with numpy broadcasting.", ["data*"])
_op("Where", "numpy.where(condition, X, Y).", ["condition", "X", "Y"])

# -- linear algebra ----------------------------------------------------------------------------
_op("MatMul", "numpy.matmul.", ["A", "B"])
_op("Gemm", "alpha * A' . B' + beta * C (ONNX Gemm).", ["A", "B", "C?"], attrs={
    "alpha": Attr(A.FLOAT, default=1.0), "beta": Attr(A.FLOAT, default=1.0),
    "transA": Attr(A.INT, default=0, allowed=(0, 1)),
    "transB": Attr(A.INT, default=0, allowed=(0, 1))})

# -- tensor shape and data movement ------------------------------------------------------------
_op("Flatten", "ONNX Flatten: 2-D (prod(dims[:axis]), prod(dims[axis:])).", ["X"],
    attrs={"axis": Attr(A.INT, default=1)}, layout=LayoutClass.TERMINATE)
_op("Reshape", "ONNX Reshape (0 copies the input dim unless allowzero, one -1 inferred). "
    "``shape`` is an int64 tensor, constant once folded.", ["X", "shape"],
    attrs={"allowzero": Attr(A.INT, default=0, allowed=(0, 1))}, layout=LayoutClass.TERMINATE)
_op("Squeeze", "Remove the listed size-1 axes.", ["X"], attrs={"axes": Attr(A.INTS, required=True)},
    layout=LayoutClass.ATTRIBUTE)
_op("Unsqueeze", "Insert size-1 axes at the listed output positions.", ["X"],
    attrs={"axes": Attr(A.INTS, required=True)}, layout=LayoutClass.ATTRIBUTE)
_op("Transpose", "numpy.transpose(X, perm).", ["X"], attrs={"perm": Attr(A.INTS)},
    layout=LayoutClass.ATTRIBUTE)
_op("Concat", "Concatenate along ``axis``.", ["inputs*"], attrs={"axis": Attr(A.INT, required=True)},
    layout=LayoutClass.ATTRIBUTE)
_op("Split", "Split along ``axis`` into pieces of the listed sizes (one output each).", ["X"],
    outputs=("outputs",), attrs={"axis": Attr(A.INT, default=0),
                                  "split": Attr(A.INTS, required=True)},
    layout=LayoutClass.ATTRIBUTE)
_op("Slice", "ONNX Slice-13 with constant starts/ends/axes/steps (clamped like numpy).", ["X"],
    attrs={"starts": Attr(A.INTS, required=True), "ends": Attr(A.INTS, required=True),
           "axes": Attr(A.INTS), "steps": Attr(A.INTS)}, layout=LayoutClass.ATTRIBUTE)
_op("Pad", "ONNX Pad: pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...] over all axes.", ["X"],
    attrs={"pads": Attr(A.INTS, required=True),
           "mode": Attr(A.STRING, default="constant", allowed=("constant", "reflect", "edge",
                                                                    "symmetric")),
           "value": Attr(A.FLOAT, default=0.0)}, layout=LayoutClass.ATTRIBUTE)
for _name in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd"):
    _op(_name, f"{_name} over ``axes`` (all axes when absent).", ["X"],
        attrs={"axes": Attr(A.INTS), "keepdims": Attr(A.INT, default=1, allowed=(0, 1))},
        layout=LayoutClass.ATTRIBUTE)
for _name in ("Softmax", "LogSoftmax"):
    _op(_name, f"{_name} along one axis (ONNX-13 semantics; frontends express older "
        "coerce-to-2-D forms with Flatten/Reshape).", ["X"],
        attrs={"axis": Attr(A.INT, default=-1)}, layout=LayoutClass.ATTRIBUTE)
_op("ArgMax", "Index of the maximum along ``axis`` (int64).", ["X"],
    attrs={"axis": Attr(A.INT, default=0), "keepdims": Attr(A.INT, default=1)},
    layout=LayoutClass.ATTRIBUTE)

# -- shape computation (folded away when constant) ----------------------------------------------
_op("Shape", "The input's shape as int64.", ["X"])
_op("Size", "The input's element count as int64.", ["X"])
_op("Gather", "numpy.take(data, indices, axis).", ["data", "indices"],
    attrs={"axis": Attr(A.INT, default=0)}, layout=LayoutClass.ATTRIBUTE)
_op("Cast", "Convert element type to ``to`` (a numpy dtype name).", ["X"],
    attrs={"to": Attr(A.STRING, required=True)})
_op("ConstantOfShape", "A tensor of the given shape filled with ``value``.", ["shape"],
    attrs={"value": Attr(A.TENSOR)})
_op("Range", "numpy.arange(start, limit, delta).", ["start", "limit", "delta"])
_op("Expand", "Broadcast X to ``shape`` (numpy rules).", ["X", "shape"])
_op("Tile", "numpy.tile(X, repeats).", ["X", "repeats"])
