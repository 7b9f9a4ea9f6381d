"""onnxruntime graph transforms applied after export: offline optimisation and int8 quantisation.

Offline optimisation stops at onnxruntime's *basic* level (constant folding, redundant node
elimination, shape simplification). Those rewrites use standard ONNX ops only, so the saved graph
still runs unchanged on every execution provider, CPU and CUDA alike; the extended/layout levels
insert provider-specific fused ops and are left to each session at load time.

int8 is onnxruntime's dynamic quantisation: weights of every MatMul with a constant weight (the
attention and FFN projections and the vocabulary projection) are stored as int8, per output channel,
and activations are quantised on the fly. Attention score MatMuls (activation x activation) stay in
float, and so do embeddings and LayerNorms.
"""

from __future__ import annotations

import logging
from pathlib import Path

import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic


def optimize(src: Path, dst: Path) -> Path:
    """Write the basic-level onnxruntime optimisation of ``src`` to ``dst``."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(dst)
    ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])
    return dst


def quantize(src: Path, dst: Path) -> Path:
    """Write the int8 dynamic quantisation of the fp32 graph ``src`` to ``dst``."""
    # The quantiser logs advice (pre-processing) at WARNING on every call; it does not apply here:
    # the input is already optimised and the graph has no shapes left to infer that matter.
    quant_log = logging.getLogger()
    level = quant_log.level
    quant_log.setLevel(logging.ERROR)
    try:
        quantize_dynamic(
            src,
            dst,
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
            extra_options={"MatMulConstBOnly": True},
        )
    finally:
        quant_log.setLevel(level)
    return dst
