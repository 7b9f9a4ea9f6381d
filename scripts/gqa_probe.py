"""Whether onnxruntime's CUDA provider runs GroupQueryAttention as the row pool uses it
(``engine.pool_graph``: one query position per row, past and present in one buffer, per-row
``seqlens_k``) in float32 and in float16, against the CPU's float32 answer, and how long a call takes.
Run by ``scripts/gpu_check.sh`` on a GPU machine."""

from __future__ import annotations

import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

ROWS, HEADS, HEAD_DIM, WIDTH = 128, 8, 64, 256
DIM = HEADS * HEAD_DIM


def graph(dtype: int) -> bytes:
    def tensor(name: str, shape: list[int]) -> helper.ValueInfoProto:
        return helper.make_tensor_value_info(name, dtype, shape)

    node = helper.make_node(
        "GroupQueryAttention",
        ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total"],
        ["out", "present_k", "present_v"],
        domain="com.microsoft",
        num_heads=HEADS,
        kv_num_heads=HEADS,
        scale=HEAD_DIM**-0.5,
    )
    cache = [ROWS, HEADS, WIDTH, HEAD_DIM]
    inputs = [tensor(n, [ROWS, 1, DIM]) for n in ("q", "k", "v")] + [tensor("past_k", cache), tensor("past_v", cache)]
    inputs += [
        helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [ROWS]),
        helper.make_tensor_value_info("total", TensorProto.INT32, []),
    ]
    outputs = [tensor("out", [ROWS, 1, DIM]), tensor("present_k", cache), tensor("present_v", cache)]
    model = helper.make_model(
        helper.make_graph([node], "gqa", inputs, outputs),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    return model.SerializeToString()


def feeds(dtype: type) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, WIDTH - 1, ROWS).astype(np.int32)
    cache = rng.standard_normal((ROWS, HEADS, WIDTH, HEAD_DIM)).astype(dtype)
    return {
        **{n: rng.standard_normal((ROWS, 1, DIM)).astype(dtype) for n in ("q", "k", "v")},
        "past_k": cache,
        "past_v": cache.copy(),
        "seqlens_k": lengths,  # the total length after this step, less one
        "total": np.array(WIDTH, dtype=np.int32),
    }


def main() -> None:
    reference = ort.InferenceSession(graph(TensorProto.FLOAT), providers=["CPUExecutionProvider"])
    expected = reference.run(["out"], feeds(np.float32))[0]
    for name, onnx_type, dtype in (
        ("float32", TensorProto.FLOAT, np.float32),
        ("float16", TensorProto.FLOAT16, np.float16),
    ):
        try:
            session = ort.InferenceSession(graph(onnx_type), providers=["CUDAExecutionProvider"])
            inputs = feeds(dtype)
            out = session.run(["out"], inputs)[0]
            start = time.perf_counter()
            for _ in range(20):
                session.run(["out"], inputs)
            per_call = (time.perf_counter() - start) / 20
            error = float(np.abs(out.astype(np.float32) - expected).max())
            sys.stdout.write(
                f"{name}: runs on {session.get_providers()[0]}, max |cuda - cpu fp32| {error:.2e}, "
                f"{per_call * 1e3:.3f} ms a call with its inputs copied in\n"
            )
        except Exception as e:  # the probe reports what onnxruntime says and goes on
            sys.stdout.write(f"{name}: fails: {type(e).__name__}: {str(e)[:300]}\n")


if __name__ == "__main__":
    main()
