"""export/quantize.py's per-row int8 MatMul on small graphs run by onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from export.quantize import quantize_matmuls

K, N = 48, 24


def matmul_graph(weight: np.ndarray, *, relu: bool) -> onnx.ModelProto:
    """y = x @ weight, or relu(x) @ weight, for x of shape (B, T, K)."""
    nodes = [helper.make_node("Relu", ["x"], ["h"])] if relu else []
    nodes.append(helper.make_node("MatMul", ["h" if relu else "x", "w"], ["y"], name="/proj/MatMul"))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T", N])],
        [numpy_helper.from_array(weight, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("relu", [False, True])
def test_rowwise_int8_matmul_is_close_and_independent_of_the_other_rows(relu: bool) -> None:
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(K, N)).astype(np.float32)
    quantized = quantize_matmuls(matmul_graph(weight, relu=relu))
    assert [n.op_type for n in quantized.graph.node].count("MatMulIntegerToFloat") == 1
    assert not any(n.op_type == "MatMul" for n in quantized.graph.node)
    exact, int8 = session(matmul_graph(weight, relu=relu)), session(quantized)

    x = rng.normal(size=(4, 3, K)).astype(np.float32)
    x[1] *= 100  # one sentence with large activations: a per-tensor scale would crush the others
    x[2, 1] = 0  # an all-zero row quantises to zeros, not NaN
    (want,) = exact.run(None, {"x": x})
    (got,) = int8.run(None, {"x": x})
    assert np.all(np.isfinite(got)) and np.all(got[2, 1] == 0)
    scale = np.abs(want).max(axis=-1, keepdims=True)
    assert np.abs(got - want).max() / scale.max() < 0.03
    assert (np.abs(got - want) / np.maximum(scale, 1e-6)).max() < 0.03, "every row keeps its own precision"

    for b in range(len(x)):  # alone, each sentence gets bitwise the same rows
        (alone,) = int8.run(None, {"x": x[b : b + 1]})
        assert np.array_equal(alone[0], got[b])


def test_only_matmuls_with_a_constant_matrix_are_quantized() -> None:
    """Attention's activation x activation products stay in float."""
    rng = np.random.default_rng(1)
    model = matmul_graph(rng.normal(size=(K, N)).astype(np.float32), relu=False)
    model.graph.node.extend(
        [
            helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1]),
            helper.make_node("MatMul", ["y", "yt"], ["scores"]),
        ]
    )
    model.graph.output.append(helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", "T", "T"]))
    quantized = quantize_matmuls(model)
    ops = [n.op_type for n in quantized.graph.node]
    assert ops.count("MatMulIntegerToFloat") == 1 and ops.count("MatMul") == 1
    x = rng.normal(size=(2, 5, K)).astype(np.float32)
    want, got = session(model).run(["scores"], {"x": x})[0], session(quantized).run(["scores"], {"x": x})[0]
    assert np.abs(got - want).max() / np.abs(want).max() < 0.05
