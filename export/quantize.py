"""onnxruntime graph transforms applied after export: offline optimisation and int8 quantisation.

Offline optimisation stops at onnxruntime's *basic* level (constant folding, redundant node
elimination, shape simplification). Those rewrites use standard ONNX ops only, so the saved graph
still runs unchanged on every execution provider, CPU and CUDA alike; the extended/layout levels
insert provider-specific fused ops and are left to each session at load time.

int8 is onnxruntime's dynamic quantisation: weights of every MatMul with a constant weight (the
attention and FFN projections and the vocabulary projection) are stored as int8, per output channel,
and activations are quantised on the fly; the embedding tables (Gather) are stored as int8 too.
Attention score MatMuls (activation x activation) and LayerNorms stay in float.

Measured on the 2.9M-parameter en-de model (step 1600 of training, 400 test sentences, greedy):
fp32 27.73 BLEU; MatMul per-channel 27.62; MatMul per-tensor 28.05; MatMul + Gather per-channel
27.67 at 5.45 MB for both graphs instead of 11.8 MB (fp32: 20.1 MB). The differences are within
noise, so the smallest variant is the one built.
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
    # The quantiser logs through the root logger: a line per skipped tensor, and advice to
    # pre-process (shape inference) that does not apply to dynamic quantisation of these graphs.
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        quantize_dynamic(
            src,
            dst,
            op_types_to_quantize=["MatMul", "Gather"],
            per_channel=True,
            weight_type=QuantType.QInt8,
            extra_options={"MatMulConstBOnly": True},
        )
    finally:
        root.setLevel(level)
    return dst
