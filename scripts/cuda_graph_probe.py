"""Whether onnxruntime can capture the row pool's decoder step as a CUDA graph, and what a replayed
step costs against a plain run. Run by ``scripts/gpu_check.sh`` on a GPU machine; on a machine
without CUDA it checks the step it would capture on the CPU and says so.

The step is the shipped decoder's as ``engine.pool_graph`` edits it, each layer's
``GroupQueryAttention`` in float16 (onnxruntime's CUDA kernel takes float16 or bfloat16 only: the
cache buffers are float16, q, k and v are cast in and the attention cast out), at fixed capacity
shapes, as a CUDA graph needs: ``ROWS`` rows, ``SLOTS`` sentence slots of ``SOURCE`` positions, a
cache of ``WIDTH`` positions. Every input and output is bound once, in device memory (the
candidates' count and the attention's total length, the buffer's width, in host memory, where the
kernels read them); between replays the inputs are written in place (``OrtValue.update_inplace``).
Checked: the plain CUDA run against the CPU's float32 step (the same best tokens), the replay
against the plain run after the rows' positions moved on. It first prints where onnxruntime places
the step's nodes: a node on the CPU that is not a shape computation keeps the step from being
captured. The engine's own captured step is ``engine.captured_step``; this probe times one shape
of it alone. Run from the repository's root with it on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from engine.captured_step import HOST_INPUTS
from engine.pool_graph import POSITIONS, QUERY_SLOTS, ROW_SLOTS, TOTAL_LENGTH, with_half_attention, with_pool_inputs

DECODER = Path(__file__).resolve().parents[1] / "models" / "en-de" / "bundle" / "decoder.onnx"
ROWS, SLOTS, SOURCE, WIDTH, CANDIDATES, REPLAYS = 128, 32, 32, 256, 9, 200
CUDA = "CUDAExecutionProvider"


def pool_step(half: bool) -> onnx.ModelProto:
    """The pool's step of the shipped decoder; ``half``: its attention in float16."""
    model = onnx.load(str(DECODER))
    with_pool_inputs(model)
    if half:
        with_half_attention(model)
    return model


def inputs(model: onnx.ModelProto, half: bool) -> dict[str, np.ndarray]:
    """A step at capacity: ragged rows, 4 to a sentence slot."""
    rng = np.random.default_rng(0)
    cache_type = np.float16 if half else np.float32
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    heads, d_head = shapes["self_k_0"][1], shapes["self_k_0"][3]
    feed: dict[str, np.ndarray] = {
        "tokens": rng.integers(4, 1000, (ROWS, 1)),
        "candidates": np.array([CANDIDATES]),
        POSITIONS: rng.integers(1, 40, ROWS),
        QUERY_SLOTS: np.arange(ROWS),  # slot s answers rows 4s .. 4s + 3
        ROW_SLOTS: np.arange(ROWS),
        TOTAL_LENGTH: np.array(WIDTH, dtype=np.int32),
        "src_mask": np.ones((SLOTS, SOURCE), dtype=bool),
    }
    for name in shapes:
        if name.startswith("self_"):
            feed[name] = rng.standard_normal((ROWS, heads, WIDTH, d_head)).astype(cache_type)
        elif name.startswith("cross_"):
            feed[name] = rng.standard_normal((SLOTS, heads, SOURCE, d_head)).astype(np.float32)
    return feed


def best(outputs: dict[str, np.ndarray]) -> np.ndarray:
    return outputs["top_ids"][:, 0]


def cpu_reference() -> dict[str, np.ndarray]:
    model = pool_step(half=False)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = ["top_log_probs", "top_ids"]
    return dict(zip(names, session.run(names, inputs(model, half=False)), strict=True))


class Bound:
    """A session of the half step on ``provider`` with every input and output in device memory
    (``HOST_INPUTS`` in host memory, where the kernels read them), outputs allocated by onnxruntime or,
    for a CUDA graph, into ``like``'s outputs' shapes, at addresses fixed before the capture."""

    def __init__(self, model: onnx.ModelProto, provider: str, like: Bound | None = None) -> None:
        options = [{"enable_cuda_graph": "1"}] if like is not None else None
        self.session = ort.InferenceSession(model.SerializeToString(), providers=[provider], provider_options=options)
        self.device = "cuda" if provider == CUDA else "cpu"
        self.feed = inputs(model, half=True)
        self.values = {
            name: ort.OrtValue.ortvalue_from_numpy(value, "cpu" if name in HOST_INPUTS else self.device, 0)
            for name, value in self.feed.items()
        }
        self.binding = self.session.io_binding()
        for name, value in self.values.items():
            self.binding.bind_ortvalue_input(name, value)
        names = [o.name for o in self.session.get_outputs()]
        for name in names:
            present = name.replace("present_", "self_")
            if present in self.values:  # written in place
                self.binding.bind_ortvalue_output(name, self.values[present])
            elif like is not None:
                made = like.outputs[name]
                value = ort.OrtValue.ortvalue_from_shape_and_type(made.shape(), made.numpy().dtype, self.device, 0)
                self.binding.bind_ortvalue_output(name, value)
            else:
                self.binding.bind_output(name, self.device)
        self.run()  # a CUDA graph is captured here
        self.outputs = dict(zip(names, self.binding.get_outputs(), strict=True))

    def run(self) -> None:
        self.session.run_with_iobinding(self.binding)

    def result(self) -> dict[str, np.ndarray]:
        return {name: self.outputs[name].numpy() for name in ("top_log_probs", "top_ids")}

    def advance(self) -> None:
        """The rows one position on, written into the bound input."""
        self.feed[POSITIONS] = self.feed[POSITIONS] + 1
        self.values[POSITIONS].update_inplace(self.feed[POSITIONS])

    def ms_per_run(self, runs: int) -> float:
        start = time.perf_counter()
        for _ in range(runs):
            self.run()
        self.outputs["top_ids"].numpy()  # waits for the device
        return (time.perf_counter() - start) / runs * 1e3


def say(line: str) -> None:
    sys.stdout.write(line + "\n")


def main() -> None:
    expected = cpu_reference()
    provider = CUDA if CUDA in ort.get_available_providers() else "CPUExecutionProvider"
    probe(pool_step(half=True), provider, expected)


def placements(model: onnx.ModelProto, provider: str) -> list[str]:
    """onnxruntime's own account of which provider runs which node (its verbose log of the
    session's creation, read back from stderr): a node on the CPU keeps a step from being captured."""
    options = ort.SessionOptions()
    options.log_severity_level = 0
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as log:
        os.dup2(log.fileno(), 2)
        try:
            ort.InferenceSession(model.SerializeToString(), options, providers=[provider])
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        return [line.rstrip() for line in log if "VerifyEachNodeIsAssignedToAnEp" in line]


def probe(half: onnx.ModelProto, provider: str, expected: dict[str, np.ndarray]) -> None:
    for line in placements(half, provider):
        say(line.split("] ", 1)[-1])
    stage = f"the half step on {provider}"
    try:  # the probe reports what onnxruntime says at the stage it fails
        plain = Bound(half, provider)
        agree = float(np.mean(best(plain.result()) == best(expected)))
        say(f"{stage}: best token as the CPU's float32 step for {agree:.1%} of {ROWS} rows")
        if provider != CUDA:
            say("no CUDA provider: no CUDA graph to capture")
            return
        stage = "capturing the CUDA graph"
        captured = Bound(half, provider, like=plain)
        stage = "replaying it after the positions moved on"
        for bound in (plain, captured):
            bound.advance()
            bound.run()
        names = ("top_log_probs", "top_ids")
        same = all(np.array_equal(plain.result()[n], captured.result()[n]) for n in names)
        say(f"CUDA graph: captured; after the positions moved on, replay equal to a plain run: {same}")
        plain_ms, replayed_ms = plain.ms_per_run(REPLAYS), captured.ms_per_run(REPLAYS)
        say(f"ms a step at {ROWS} rows: plain {plain_ms:.3f}, replayed {replayed_ms:.3f}")
    except Exception as e:
        say(f"{stage}: fails: {type(e).__name__}: {str(e)[:400]}")


if __name__ == "__main__":
    main()
