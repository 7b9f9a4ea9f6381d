"""onnxruntime execution of a bundle's encoder and decoder-step graphs.

``Runner`` owns the two sessions (provider and threads chosen by ``RunnerConfig``), runs the
encoder once per batch, and hands out a decoder state per batch that implements
``beam_search.Decoder``: ``step`` runs one decoder step and keeps the grown self-attention cache,
``select`` reorders it by beam origin and drops finished sentences.

Two implementations of that state:

- ``HostDecoder`` (CPU): numpy arrays in, numpy arrays out. The cache returned by a step is fed
  straight into the next one; ``select`` copies it only when the row order actually changes, and
  copies the source side (cross keys/values, mask) only when a sentence leaves the batch.
- ``DeviceDecoder`` (CUDA): the same protocol with IO binding, so the cache and the source side
  stay in device memory between steps; reordering runs a one-node Gather graph on the device.
  Only the new tokens go up and the log-probabilities (and attention, when asked) come down.
  It needs the ``onnx`` package to build that Gather graph. It runs on CPU too
  (``device="cpu"``), which is how the tests check it against ``HostDecoder``.

Shape legend: B sentences, K beams, N = B*K rows, S source length, P cached positions,
L decoder layers, H heads, Dh head size, V vocabulary.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import onnxruntime as ort

log = logging.getLogger(__name__)

Provider = Literal["auto", "cpu", "cuda"]
CPU, CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"


class RunnerError(Exception):
    """The requested execution provider is unavailable, or a graph cannot be loaded."""


@dataclass(frozen=True)
class RunnerConfig:
    provider: Provider = "auto"  # auto: CUDA when onnxruntime-gpu and a GPU are present, else CPU
    threads: int = 0  # intra-op threads; 0 = onnxruntime's default (one per physical core)
    # Idle onnxruntime workers busy-wait for the next run by default. Between decoder steps the
    # search runs in Python, and spinning workers took its cores: measured 25-35% slower on 2 cores.
    spin: bool = False
    device_id: int = 0

    def __post_init__(self) -> None:
        if self.provider not in ("auto", "cpu", "cuda"):
            raise RunnerError(f"provider must be auto, cpu or cuda, got {self.provider!r}")
        if self.threads < 0:
            raise RunnerError(f"threads must be >= 0, got {self.threads}")


@dataclass
class Encoded:
    """Encoder outputs for B sentences: cross_k/v (L, B, H, S, Dh) float32, src_mask (B, S) bool."""

    cross_k: np.ndarray
    cross_v: np.ndarray
    src_mask: np.ndarray


@dataclass(frozen=True)
class CacheShape:
    layers: int
    heads: int
    d_head: int

    def empty(self, rows: int) -> np.ndarray:
        return np.zeros((self.layers, rows, self.heads, 0, self.d_head), dtype=np.float32)  # (L, N, H, 0, Dh)


def session_options(threads: int, *, spin: bool) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # warnings about unused initializers etc. are noise here
    return options


def load_session(path: Path, provider: str, config: RunnerConfig) -> ort.InferenceSession:
    providers: list[str | tuple[str, dict[str, str]]] = [CPU]
    if provider == "cuda":
        providers = [(CUDA, {"device_id": str(config.device_id)}), CPU]
    try:
        return ort.InferenceSession(str(path), session_options(config.threads, spin=config.spin), providers=providers)
    except Exception as e:  # onnxruntime raises its own, unexported exception types
        raise RunnerError(f"{path}: onnxruntime cannot load the graph: {e}") from e


def resolve_provider(requested: Provider) -> Literal["cpu", "cuda"]:
    """``auto`` -> cuda when this onnxruntime build has the CUDA provider; ``cuda`` must have it."""
    has_cuda = CUDA in ort.get_available_providers()
    if requested == "cuda" and not has_cuda:
        raise RunnerError(
            "provider 'cuda' requested but this onnxruntime has no CUDAExecutionProvider "
            "(install onnxruntime-gpu in place of onnxruntime: pip install .[gpu])"
        )
    return "cuda" if requested == "cuda" or (requested == "auto" and has_cuda) else "cpu"


class Runner:
    def __init__(self, encoder: Path, decoder: Path, cache: CacheShape, config: RunnerConfig) -> None:
        self.cache = cache
        self.provider = resolve_provider(config.provider)
        self.encoder = load_session(encoder, self.provider, config)
        self.decoder = load_session(decoder, self.provider, config)
        if self.provider == "cuda" and CUDA not in self.decoder.get_providers():
            # onnxruntime-gpu on a machine without a usable GPU falls back to CPU on its own.
            if config.provider == "cuda":
                raise RunnerError("provider 'cuda' requested but onnxruntime could not initialise CUDA (no GPU?)")
            log.warning("CUDA provider unavailable at run time; running on CPU")
            self.provider = "cpu"
        self.device_id = config.device_id

    def encode(self, src_ids: np.ndarray) -> Encoded:
        """src_ids (B, S) int64, padded with pad id 0."""
        cross_k, cross_v, src_mask = self.encoder.run(None, {"src_ids": src_ids})
        return Encoded(cross_k, cross_v, src_mask)

    def start(self, encoded: Encoded, beams: int, *, attention: bool) -> HostDecoder | DeviceDecoder:
        """A fresh decoder state for the sentences of ``encoded``, ``beams`` rows each."""
        if self.provider == "cuda":
            device = dict(device="cuda", device_id=self.device_id)
            return DeviceDecoder(self.decoder, encoded, self.cache, beams, attention=attention, **device)
        return HostDecoder(self.decoder, encoded, self.cache, beams, attention=attention)


class HostDecoder:
    """Decoder state in host memory (the CPU provider); implements ``beam_search.Decoder``."""

    def __init__(
        self, session: ort.InferenceSession, encoded: Encoded, cache: CacheShape, beams: int, *, attention: bool
    ) -> None:
        rows = encoded.src_mask.shape[0] * beams
        self.session = session
        self.outputs = ["log_probs", "new_self_k", "new_self_v"] + (["alignment"] if attention else [])
        self.feed = {
            "self_k": cache.empty(rows),
            "self_v": cache.empty(rows),
            "cross_k": encoded.cross_k,
            "cross_v": encoded.cross_v,
            "src_mask": encoded.src_mask,
        }

    def step(self, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        self.feed["tokens"] = tokens[:, None]  # (N, 1)
        log_probs, self_k, self_v, *attention = self.session.run(self.outputs, self.feed)
        self.feed["self_k"], self.feed["self_v"] = self_k, self_v  # (L, N, H, P+1, Dh)
        return log_probs, attention[0] if attention else None

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        if not is_identity(rows, self.feed["self_k"].shape[1]):
            self.feed["self_k"] = np.take(self.feed["self_k"], rows, axis=1)
            self.feed["self_v"] = np.take(self.feed["self_v"], rows, axis=1)
        if sentences is not None:
            self.feed["cross_k"] = np.take(self.feed["cross_k"], sentences, axis=1)
            self.feed["cross_v"] = np.take(self.feed["cross_v"], sentences, axis=1)
            self.feed["src_mask"] = np.take(self.feed["src_mask"], sentences, axis=0)


def is_identity(rows: np.ndarray, n: int) -> bool:
    return len(rows) == n and bool(np.all(rows == np.arange(n)))


# ---------------------------------------------------------------------------------------------
# CUDA: IO binding. Verified here only with device="cpu" (no GPU on the development machines).
# ---------------------------------------------------------------------------------------------


class DeviceDecoder:
    """Decoder state kept in device memory as OrtValues; implements ``beam_search.Decoder``."""

    def __init__(
        self,
        session: ort.InferenceSession,
        encoded: Encoded,
        cache: CacheShape,
        beams: int,
        *,
        attention: bool,
        device_id: int,
        device: str = "cuda",
    ) -> None:
        self.session, self.device, self.device_id = session, device, device_id
        self.attention = attention
        rows = encoded.src_mask.shape[0] * beams
        self.gather = DeviceGather(session.get_providers(), device, device_id)
        self.values = {
            "self_k": self._upload(cache.empty(rows)),
            "self_v": self._upload(cache.empty(rows)),
            "cross_k": self._upload(encoded.cross_k),
            "cross_v": self._upload(encoded.cross_v),
            "src_mask": self._upload(encoded.src_mask),
        }

    def _upload(self, array: np.ndarray) -> ort.OrtValue:
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), self.device, self.device_id)

    def step(self, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        binding = self.session.io_binding()
        binding.bind_ortvalue_input("tokens", self._upload(tokens[:, None]))
        for name, value in self.values.items():
            binding.bind_ortvalue_input(name, value)
        binding.bind_output("log_probs", "cpu")
        binding.bind_output("new_self_k", self.device, self.device_id)
        binding.bind_output("new_self_v", self.device, self.device_id)
        binding.bind_output("alignment", "cpu" if self.attention else self.device, self.device_id)
        self.session.run_with_iobinding(binding)
        log_probs, self_k, self_v, alignment = binding.get_outputs()
        self.values["self_k"], self.values["self_v"] = self_k, self_v
        return log_probs.numpy(), alignment.numpy() if self.attention else None

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        if not is_identity(rows, self.values["self_k"].shape()[1]):
            for name in ("self_k", "self_v"):
                self.values[name] = self.gather(self.values[name], rows, axis=1)
        if sentences is not None:
            for name, axis in (("cross_k", 1), ("cross_v", 1), ("src_mask", 0)):
                self.values[name] = self.gather(self.values[name], sentences, axis=axis)


class DeviceGather:
    """``np.take`` for OrtValues in device memory: one-node Gather graphs, one per (axis, type)."""

    def __init__(self, providers: list[str], device: str, device_id: int) -> None:
        self.providers, self.device, self.device_id = providers, device, device_id
        self.sessions: dict[tuple[int, str], ort.InferenceSession] = {}

    def __call__(self, value: ort.OrtValue, indices: np.ndarray, *, axis: int) -> ort.OrtValue:
        key = (axis, value.data_type())
        if key not in self.sessions:
            self.sessions[key] = self._build(axis, value.data_type())
        binding = self.sessions[key].io_binding()
        binding.bind_ortvalue_input("data", value)
        binding.bind_ortvalue_input(
            "indices", ort.OrtValue.ortvalue_from_numpy(indices.astype(np.int64), self.device, self.device_id)
        )
        binding.bind_output("out", self.device, self.device_id)
        self.sessions[key].run_with_iobinding(binding)
        return binding.get_outputs()[0]

    def _build(self, axis: int, data_type: str) -> ort.InferenceSession:
        try:
            from onnx import TensorProto, helper
        except ImportError as e:
            raise RunnerError("the CUDA path needs the 'onnx' package to build its Gather graph") from e
        elem = {"tensor(float)": TensorProto.FLOAT, "tensor(bool)": TensorProto.BOOL}[data_type]
        graph = helper.make_graph(
            [helper.make_node("Gather", ["data", "indices"], ["out"], axis=axis)],
            "gather",
            [
                helper.make_tensor_value_info("data", elem, None),
                helper.make_tensor_value_info("indices", TensorProto.INT64, ["M"]),
            ],
            [helper.make_tensor_value_info("out", elem, None)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        return ort.InferenceSession(model.SerializeToString(), providers=self.providers)
