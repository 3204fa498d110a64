"""A Linear / Dense applied at every position of a feature map converts exactly as a 1x1 Conv:
PyTorch's ``x.permute(0, 2, 3, 1) -> nn.Linear -> permute(0, 3, 1, 2)`` as the TorchScript
exporter writes it (MatMul by a constant + Add, opsets 11-17) and as a flattened Gemm between
two Reshapes (opset 18), a MatMul of an (N, L, K) tensor, and Keras Dense on a rank-3 or rank-4
tensor (TensorFlow's Tensordot: Reshape -> MatMul -> Reshape). Before, the MatMul was refused
("constant-weight MatMul on a rank-4 input") and Tensordot became Reshape -> Dense -> Reshape,
refused under a symbolic batch. Numbers against onnxruntime and TensorFlow."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.frontends.exactness import converts_exactly

N, C, H, W, M = 2, 5, 6, 7, 4


def _save(tmp_path, nodes, x_shape, inits, opset, name="linear.onnx"):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / name
    onnx.save(model, path)
    return path


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    return {"cw": rng.standard_normal((C, 3, 3, 3)).astype(np.float32),
            "lw": rng.standard_normal((C, M)).astype(np.float32),
            "lb": rng.standard_normal(M).astype(np.float32)}


def _torchscript_linear(tmp_path, batch, opset):
    """Conv -> permute -> Linear (MatMul + Add) -> permute back -> Relu."""
    nodes = [
        helper.make_node("Conv", ["x", "cw"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["t", "lw"], ["m"], name="/fc/MatMul"),
        helper.make_node("Add", ["m", "lb"], ["a"], name="/fc/Add"),
        helper.make_node("Transpose", ["a"], ["b"], perm=[0, 3, 1, 2]),
        helper.make_node("Relu", ["b"], ["y"]),
    ]
    return _save(tmp_path, nodes, [batch, 3, H, W], _weights(), opset)


def _flattened_gemm_linear(tmp_path, batch):
    """The opset-18 form: permute -> Reshape (P, K) -> Gemm(transB) -> Reshape back."""
    weights = _weights(1)
    weights["lw"] = weights["lw"].T.copy()  # (M, K) for transB
    lead = [-1 if batch == "N" else N, H, W]
    weights["flat"] = np.array([-1, C], np.int64)
    weights["back"] = np.array([*lead, M], np.int64)
    nodes = [
        helper.make_node("Conv", ["x", "cw"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["t", "flat"], ["f"]),
        helper.make_node("Gemm", ["f", "lw", "lb"], ["g"], transB=1, alpha=0.5, beta=2.0,
                         name="/fc/Gemm"),
        helper.make_node("Reshape", ["g", "back"], ["r"]),
        helper.make_node("Transpose", ["r"], ["y"], perm=[0, 3, 1, 2]),
    ]
    return _save(tmp_path, nodes, [batch, 3, H, W], weights, 18)


@pytest.mark.parametrize("batch", [N, "N"], ids=["static", "symbolic"])
@pytest.mark.parametrize("opset", [11, 13, 17, 18])
def test_torch_linear_on_a_permuted_map_is_a_pointwise_conv(tmp_path, opset, batch):
    _, model = converts_exactly(_torchscript_linear(tmp_path, batch, opset), tmp_path,
                                symbolic=batch == "N")
    assert model.graph.op_counts() == {"Conv": 2, "AddBias": 1, "Relu": 1}


@pytest.mark.parametrize("batch", [N, "N"], ids=["static", "symbolic"])
def test_linear_as_a_flattened_gemm_between_reshapes_is_a_pointwise_conv(tmp_path, batch):
    _, model = converts_exactly(_flattened_gemm_linear(tmp_path, batch), tmp_path,
                                symbolic=batch == "N")
    assert model.graph.op_counts() == {"Conv": 2}  # the Gemm's bias is the Conv's


@pytest.mark.parametrize("batch", [N, "N"], ids=["static", "symbolic"])
def test_matmul_of_a_sequence_by_a_constant_converts(tmp_path, batch):
    """(N, L, K) . (K, M) + b, a transformer's token projection: the input is kept in its
    order (a rank-3 tensor read by a MatMul is not an N,C,L map)."""
    w = _weights(2)
    nodes = [helper.make_node("MatMul", ["x", "lw"], ["m"], name="proj"),
             helper.make_node("Add", ["m", "lb"], ["y"], name="bias")]
    path = _save(tmp_path, nodes, [batch, H, C], {"lw": w["lw"], "lb": w["lb"]}, 13)
    _, model = converts_exactly(path, tmp_path, symbolic=batch == "N")
    assert model.graph.op_counts()["Conv"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("batch", [N, None], ids=["static", "symbolic"])
@pytest.mark.parametrize("rank", [3, 4])
def test_keras_dense_on_a_map_is_a_pointwise_conv(tmp_path, rank, batch):
    import keras

    keras.utils.set_random_seed(3)
    shape = (H, W, 3) if rank == 4 else (H, 3)
    inp = keras.Input(shape, batch_size=batch)
    out = keras.layers.Dense(M)(keras.layers.Dense(C, activation="relu")(inp))
    source = tmp_path / "dense.keras"
    keras.Model(inp, out).save(source)
    _, model = converts_exactly(source, tmp_path, symbolic=batch is None)
    ops = model.graph.op_counts()
    assert ops["Conv"] == 2 and "Dense" not in ops and "MatMul" not in ops
