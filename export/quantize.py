"""onnxruntime graph transforms applied after export: offline optimisation and int8 quantisation.

Offline optimisation stops at onnxruntime's *basic* level (constant folding, redundant node
elimination, shape simplification). Those rewrites use standard ONNX ops only, so the saved graph
still runs unchanged on every execution provider, CPU and CUDA alike; the extended/layout levels
insert provider-specific fused ops and are left to each session at load time.

int8 quantises every MatMul with a constant weight (the attention and FFN projections and the
vocabulary projection) and the embedding tables. Its activations are quantised **per row**: each
token of each sentence and beam gets its own scale, so a sentence's translation never depends on
the batch it shares (onnxruntime's dynamic quantisation takes one scale per tensor, hence per
batch: 13 of 64 test sentences translated differently alone than in a batch of 64). Per MatMul:

    m = max(|x_row|)                                  (..., M, 1)  Abs, ReduceMax, Max
    q = round(x / m * 127) + 128               uint8  (..., M, K)  Div, QuantizeLinear
    y = (q - 128) @ Wq * m * w_scale / 127            (..., M, N)  MatMulIntegerToFloat

with Wq int8 per output channel. Weights take 7 bits (±63): onnxruntime's uint8 x int8 kernels on
AVX2 add pairs of products in int16, which saturates with 8-bit weights (255 · 127 · 2 > 32767);
7 bits cannot overflow. An input that comes out of a ReLU is never negative and uses 0..255 with
zero point 0.

Measured on mt-en-de (test_2016_flickr, beam 4): fp32 39.28 BLEU; this per-row int8 39.28; with
8-bit weights 38.98 (saturation); with int8 x int8 kernels 39.31 (no saturation) but slower than
fp32; onnxruntime's weight-only MatMulNBits is batch-invariant too but slower than fp32 on these
small matrices. Speeds: benchmarks/RESULTS.md, section 9 and "Tried and dropped".
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from export.graph_files import EXTERNAL_MIN_BYTES, external_data, save_graph

WEIGHT_LEVELS = 63  # 7-bit weights: see the module docstring
SIGNED_LEVELS, SIGNED_ZERO_POINT = 127, 128  # activations of either sign, stored as uint8 around 128
RELU_LEVELS = 255  # non-negative activations use the whole uint8 range
MICROSOFT = "com.microsoft"  # onnxruntime's contrib ops: MatMulIntegerToFloat
TINY = np.float32(1e-30)  # keeps the scale of an all-zero row from being 0


def optimize(src: Path, dst: Path) -> Path:
    """Write the basic-level onnxruntime optimisation of ``src`` to ``dst``, its weights to
    ``external_data(dst)``."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(dst)
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", external_data(dst).name)
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", str(EXTERNAL_MIN_BYTES)
    )
    ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])
    return dst


def quantize(src: Path, dst: Path) -> Path:
    """Write the optimised int8 graph of the *unoptimised* fp32 graph ``src`` to ``dst``.

    It must be the raw export: optimisation fuses MatMul + Add into Gemm, which this does not quantise.
    """
    with tempfile.TemporaryDirectory() as tmp:
        rowwise, gathers = Path(tmp) / "rowwise.onnx", Path(tmp) / "gathers.onnx"
        save_graph(quantize_matmuls(onnx.load(src)), rowwise)
        _quantize_gathers(rowwise, gathers)
        return optimize(gathers, dst)


def quantize_matmuls(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every MatMul whose weight is a constant matrix quantised per row (see above)."""
    graph = model.graph
    weights = {init.name: init for init in graph.initializer if len(init.dims) == 2}
    producers = {output: node for node in graph.node for output in node.output}
    nodes: list[onnx.NodeProto] = []
    added: list[onnx.TensorProto] = []
    for node in graph.node:
        weight = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None:
            nodes.append(node)
            continue
        source = producers.get(node.input[0])
        new_nodes, new_constants = _rowwise_matmul(
            node.input[0],
            node.output[0],
            numpy_helper.to_array(weight),
            name=(node.name or node.output[0]).strip("/").replace("/", "_"),
            after_relu=source is not None and source.op_type == "Relu",
        )
        nodes += new_nodes
        added += new_constants
    used = {name for node in nodes for name in node.input}
    kept = [init for init in graph.initializer if init.name in used]
    graph.ClearField("node")
    graph.node.extend(nodes)
    graph.ClearField("initializer")
    graph.initializer.extend(kept + added)
    if not any(opset.domain == MICROSOFT for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MICROSOFT, 1))
    return model


def _rowwise_matmul(
    x: str, out: str, weight: np.ndarray, *, name: str, after_relu: bool
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """The nodes and constants computing ``out = x @ weight`` in per-row int8."""

    def n(suffix: str) -> str:
        return f"{name}_q_{suffix}"

    w_scale = np.maximum(np.abs(weight).max(axis=0), TINY) / WEIGHT_LEVELS  # (N,) per output channel
    w_q = np.clip(np.round(weight / w_scale), -WEIGHT_LEVELS, WEIGHT_LEVELS).astype(np.int8)  # (K, N)
    levels, zero_point = (RELU_LEVELS, 0) if after_relu else (SIGNED_LEVELS, SIGNED_ZERO_POINT)
    # x's scale is max|x_row| / levels: the row maximum goes in as a_scale, 1 / levels into the
    # weight's scale and into QuantizeLinear's, which saves an op per MatMul.
    constants = [
        numpy_helper.from_array(w_q, n("weight")),
        numpy_helper.from_array((w_scale / levels).astype(np.float32), n("weight_scale")),
        numpy_helper.from_array(np.float32(1 / levels), n("level")),
        numpy_helper.from_array(TINY, n("tiny")),
        numpy_helper.from_array(np.uint8(zero_point), n("zero_point")),
    ]
    magnitude = x if after_relu else n("abs")
    nodes = [] if after_relu else [helper.make_node("Abs", [x], [n("abs")])]
    nodes += [
        helper.make_node("ReduceMax", [magnitude], [n("max")], axes=[-1], keepdims=1),  # (..., M, 1)
        helper.make_node("Max", [n("max"), n("tiny")], [n("max_nonzero")]),
        helper.make_node("Div", [x, n("max_nonzero")], [n("unit")]),  # each row within [-1, 1]
        # round half to even, add the zero point, saturate to uint8: one pass
        helper.make_node("QuantizeLinear", [n("unit"), n("level"), n("zero_point")], [n("x")]),
    ]
    # (..., M, N): (x_q - zero point) @ weight_q * max_nonzero * weight_scale. The following bias Add
    # stays separate: onnxruntime 1.32 multiplies a bias input by a per-row a_scale too.
    inputs = [n("x"), n("weight"), n("max_nonzero"), n("weight_scale"), n("zero_point")]
    nodes.append(helper.make_node("MatMulIntegerToFloat", inputs, [out], domain=MICROSOFT))
    return nodes, constants


def _quantize_gathers(src: Path, dst: Path) -> None:
    """Embedding tables as int8 with one scale per table (a looked-up row is dequantised alone:
    batch-invariant)."""
    # The quantiser logs through the root logger: a line per skipped tensor, and advice to
    # pre-process (shape inference) that does not apply to these graphs.
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        quantize_dynamic(
            src,
            dst,
            op_types_to_quantize=["Gather"],
            per_channel=True,
            weight_type=QuantType.QInt8,
            use_external_data_format=True,
        )
    finally:
        root.setLevel(level)
