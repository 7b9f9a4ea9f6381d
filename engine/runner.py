"""onnxruntime execution of a bundle's encoder and decoder-step graphs.

``Runner`` owns the two sessions (provider and threads chosen by ``RunnerConfig``), runs the
encoder once per batch, and hands out a decoder state per batch that implements
``engine.decoder.Decoder``: ``step`` runs one decoder step and keeps the grown self-attention cache,
``select`` reorders it by beam origin and drops finished sentences.

Two implementations of that state:

- ``HostDecoder`` (CPU): numpy arrays in, numpy arrays out. The cache returned by a step is fed
  straight into the next one; ``select`` copies it only when the row order actually changes, and
  copies the source side (cross keys/values, mask) only when a sentence leaves the batch.
- ``DeviceDecoder`` (CUDA): the same protocol with IO binding, so the cache and the source side
  stay in device memory between steps. Its decoder graph picks its own rows (``engine.step_rows``):
  ``select`` only records which rows and sentences the next step reads. Only the new tokens and
  those indices go up, and the best tokens (the log-probabilities and attention when asked) come
  down. It runs on CPU too (``device="cpu"``), which is how the tests check it against ``HostDecoder``.

Shape legend: B sentences, K beams, N = B*K rows, S source length, P cached positions,
L decoder layers, H heads, Dh head size, V vocabulary. Caches and cross keys/values are one tensor
per layer, named as in ``engine.bundle``'s signatures, each with its row (or sentence) axis first.
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import onnxruntime as ort

from engine.bundle import per_layer
from engine.decoder import Step
from engine.half_precision import half_graph, to_float16
from engine.heap import release_memory
from engine.pool_graph import POSITIONS, with_half_attention, with_pool_inputs
from engine.shared_weights import session_model
from engine.shortlist import EXTERNAL_FOLDER, VOCAB_IDS, add_vocab_ids
from engine.step_head import ALL_LOG_PROBS, with_row_chunked_head
from engine.step_rows import CACHE_ROWS, SOURCE_ROWS, with_row_inputs
from engine.top_k import with_chunked_top_k

log = logging.getLogger(__name__)

Provider = Literal["auto", "cpu", "cuda"]
CPU, CUDA = "CPUExecutionProvider", "CUDAExecutionProvider"


class RunnerError(Exception):
    """The requested execution provider is unavailable, or a graph cannot be loaded."""


@dataclass(frozen=True)
class RunnerConfig:
    provider: Provider = "auto"  # auto: CUDA when onnxruntime-gpu and a GPU are present, else CPU
    threads: int = 0  # intra-op threads; 0 = onnxruntime's default (one per physical core)
    # Idle onnxruntime workers busy-wait for the next run by default; between decoder steps the
    # search runs in Python, and spinning workers would take the cores it needs.
    spin: bool = False
    device_id: int = 0
    # CPU graphs load through a cache of their optimized copies here, whose weights every process
    # maps (engine.shared_weights); None: each process holds its own
    weights_cache: Path | None = None
    profile_prefix: str | None = None  # onnxruntime's profile of every run, written where this says
    # CPU: the decoder step as the row pool runs it (engine.pool_graph), not the exported step, whose
    # cache is one rectangle (HostDecoder)
    pool: bool = False
    # CUDA with the pool: its step captured as CUDA graphs and replayed (engine.captured_step)
    cuda_graphs: bool = False
    # float32 graphs computed in float16 (engine.half_precision), for CUDA; on the CPU it runs, slowly
    half_precision: bool = False

    def __post_init__(self) -> None:
        if self.provider not in ("auto", "cpu", "cuda"):
            raise RunnerError(f"provider must be auto, cpu or cuda, got {self.provider!r}")
        if self.threads < 0:
            raise RunnerError(f"threads must be >= 0, got {self.threads}")


@dataclass
class Encoded:
    """Encoder outputs for B sentences by graph output name: ``cross_k_i``/``cross_v_i``
    (B, H, S, Dh) float32 for each layer i, and ``src_mask`` (B, S) bool."""

    source: dict[str, np.ndarray]


@dataclass(frozen=True)
class DecoderShape:
    """The decoder's dimensions the runner needs: its cache's shape, and the vocabulary."""

    layers: int
    heads: int
    d_head: int
    vocab: int

    @property
    def names(self) -> list[str]:
        return per_layer("self_k", self.layers) + per_layer("self_v", self.layers)

    def empty(self, rows: int) -> dict[str, np.ndarray]:
        shape = (rows, self.heads, 0, self.d_head)  # (N, H, 0, Dh)
        return {name: np.zeros(shape, dtype=np.float32) for name in self.names}


def pad_batch(ids: list[list[int]], pad_id: int, width: int = 0) -> np.ndarray:
    """(B, S) int64, right-padded to one position past the longest sequence, or to ``width``
    positions if that is more.

    Why one more: onnxruntime's CPU kernels round a source of length S = 3 (mod 4) with no padding
    at all differently (in the last bit) from the same source with padding, while any amount of
    padding gives bitwise the same result. Padding every sentence, the longest included, makes a
    sentence's translation independent of the batch it is in (tests/engine/test_translator.py).
    """
    out = np.full((len(ids), max(max(map(len, ids)) + 1, width)), pad_id, dtype=np.int64)
    for i, seq in enumerate(ids):
        out[i, : len(seq)] = seq
    return out


def session_options(threads: int, *, spin: bool) -> ort.SessionOptions:
    _share_cpu_arena()
    options = ort.SessionOptions()
    options.add_session_config_entry("session.use_env_allocators", "1")
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # A memory pattern is planned for one set of input shapes and taken from the arena as one block
    # per run; a decoder's shapes change at every step, so the blocks only fragment the arena that
    # every session of the process shares: without them the OPUS-MT size peaked up to 80 MB lower at
    # the same speed (benchmarks/RESULTS.md, section 29).
    options.enable_mem_pattern = False
    options.log_severity_level = 3  # warnings about unused initializers etc. are noise here
    return options


@functools.cache
def _share_cpu_arena() -> None:
    """One CPU arena for every session of the process (encoder and decoder, every stream's, every
    model's) instead of one each: a session's arena keeps its high-water mark, so separate arenas
    each hold memory the others could reuse. At OPUS-MT size one arena peaked 50 MB lower than two
    (benchmarks/RESULTS.md, section 26). The arena grows by powers of two, onnxruntime's default:
    growing by what each request asks fragmented it and peaked higher."""
    cpu = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    ort.create_and_register_allocator(cpu, ort.OrtArenaCfg(0, 0, -1, -1))  # no cap, kNextPowerOfTwo, defaults


def start_onnxruntime() -> None:
    """Pay what onnxruntime costs a process once, before any model loads: its environment and CPU
    kernel registry (about 10 MB, made at the first session) and the onnx package that the graph
    edits import. A process that measures each model's memory as it loads (the service's engine
    processes) would otherwise charge all of it to the first model."""
    from onnx import TensorProto, helper, numpy_helper

    x, y = (helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 1]) for name in ("x", "y"))
    weight = numpy_helper.from_array(np.ones((1, 1), dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "start", [x], [y], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), session_options(1, spin=False), providers=[CPU])
    session.run(None, {"x": np.ones((1, 1), dtype=np.float32)})


def load_session(
    path: Path, provider: str, config: RunnerConfig, graph: bytes | None = None, *, cuda_graph: bool = False
) -> ort.InferenceSession:
    """The session of the graph at ``path``, or of ``graph`` (that graph edited) when given;
    ``cuda_graph``: on CUDA, its runs captured as CUDA graphs where they name one."""
    providers: list[str | tuple[str, dict[str, str]]] = [CPU]
    if provider == "cuda":
        cuda = {"device_id": str(config.device_id)} | ({"enable_cuda_graph": "1"} if cuda_graph else {})
        providers = [(CUDA, cuda), CPU]
    try:
        options = session_options(config.threads, spin=config.spin)
        if config.profile_prefix is not None:
            options.enable_profiling, options.profile_file_prefix = True, config.profile_prefix
        model = graph if graph is not None else str(path)
        if provider == "cpu" and config.weights_cache is not None:  # CUDA keeps its copy in device memory
            model = session_model(path, model, options, config.weights_cache)
        if isinstance(model, bytes) and provider == "cpu" and (files := _external_files(model)):
            return _session_mapping_weights(path, model, files, options, providers)
        if isinstance(model, bytes):  # the edited graph: its external weights are those of the graph at path
            options.add_session_config_entry(EXTERNAL_FOLDER, str(path.parent))
        return ort.InferenceSession(model, options, providers=providers)
    except Exception as e:  # onnxruntime raises its own, unexported exception types
        raise RunnerError(f"{path}: onnxruntime cannot load the graph: {e}") from e


def _external_files(graph: bytes) -> set[str]:
    """The names of the weight files ``graph`` reads, beside it (its external data)."""
    import onnx

    def locations(g: onnx.GraphProto) -> Iterator[str]:
        for tensor in g.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                yield next(entry.value for entry in tensor.external_data if entry.key == "location")
        for node in g.node:
            for attribute in node.attribute:
                for branch in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
                    yield from locations(branch)

    return set(locations(onnx.load_model_from_string(graph).graph))


def _session_mapping_weights(
    path: Path, graph: bytes, files: set[str], options: ort.SessionOptions, providers: list
) -> ort.InferenceSession:
    """A CPU session of ``graph`` (the graph at ``path`` edited) that maps its external weights
    from their files, as a session of the file itself does: one loaded from bytes reads them into
    the process (hundreds of MB at the OPUS-MT size, benchmarks/RESULTS.md, 18.1). The edited graph
    is written, with hard links to the weight files (onnxruntime refuses symbolic ones), into a
    directory beside them that is gone once it is loaded; where that cannot be written (a
    read-only bundle), the weights are read."""
    try:
        with tempfile.TemporaryDirectory(prefix=".mt-graph-", dir=path.parent) as directory:
            edited = Path(directory) / path.name
            edited.write_bytes(graph)
            for name in files:
                os.link(path.parent / name, Path(directory) / name)
            return ort.InferenceSession(str(edited), options, providers=providers)
    except OSError as e:
        log.debug("%s: the edited graph's weights are read, not mapped: %s", path, e)
    options.add_session_config_entry(EXTERNAL_FOLDER, str(path.parent))
    return ort.InferenceSession(graph, options, providers=providers)


def load_decoder(path: Path, provider: str, config: RunnerConfig, *, shortlist: bool) -> ort.InferenceSession:
    """The session of the decoder-step graph at ``path`` as the engine runs it on ``provider``
    (``decoder_graph``: the row pool's step with ``config.pool``, otherwise on CUDA with the row
    inputs ``DeviceDecoder`` needs)."""
    mapped = provider == "cpu" and config.weights_cache is None  # the cache maps what it saved either way
    cuda, half = provider == "cuda", config.half_precision
    graph = decoder_graph(path, shortlist=shortlist, mapped=mapped, cuda=cuda, pool=config.pool, half=half)
    return load_session(path, provider, config, graph, cuda_graph=config.pool and config.cuda_graphs)


def decoder_graph(
    path: Path, *, shortlist: bool, mapped: bool = False, cuda: bool = False, pool: bool = False, half: bool = False
) -> bytes | None:
    """The decoder-step graph at ``path`` as the engine runs it, serialized; None if that is the
    file as it is. A graph exported with one TopK over the vocabulary gets the chunked one
    (``engine.top_k``); with ``shortlist``, a graph without the ``vocab_ids`` input gets it
    (``engine.shortlist``); with ``pool``, the row pool's step (``engine.pool_graph``), its caches
    in float16 on ``cuda``; on ``cuda`` without it, the inputs by which the step picks its rows
    (``engine.step_rows``); on the CPU and a vocabulary large enough, the head normalised a few
    rows at a time unless all log-probabilities are asked for (``engine.step_head``); with ``half``,
    computed in float16 (``engine.half_precision``).

    ``mapped``: the session would map the graph's external weights from their files (a CPU session
    of the file itself). A graph edited only for its TopK is then left as it is: loaded from its
    bytes, onnxruntime reads external weights into the process (benchmarks/RESULTS.md, 18.1),
    hundreds of MB at the OPUS-MT size for a few percent of speed."""
    import onnx

    # External weights stay in their files: the edited graph refers to them (a session of it is
    # told where they are, ``EXTERNAL_FOLDER``), rather than holding a copy of each in this process.
    model = onnx.load(str(path), load_external_data=False)
    edited = False
    if pool:
        with_pool_inputs(model)
        if cuda:
            with_half_attention(model)
        edited = True
    elif cuda:
        edited = with_row_inputs(model)
    if half:  # before the edits that move the head into subgraphs, which the conversion cannot enter
        model, edited = to_float16(model, path.parent), True
    external = any(i.data_location == onnx.TensorProto.EXTERNAL for i in model.graph.initializer)
    needs_vocab_ids = shortlist and VOCAB_IDS not in {i.name for i in model.graph.input}
    edited |= not (mapped and external and not needs_vocab_ids) and with_chunked_top_k(model)
    if needs_vocab_ids:
        add_vocab_ids(model, str(path.parent))
        edited = True
    if not cuda:
        edited |= with_row_chunked_head(model)
    return model.SerializeToString() if edited else None


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
    def __init__(
        self, encoder: Path, decoder: Path, shape: DecoderShape, config: RunnerConfig, *, shortlist: bool = False
    ) -> None:
        """``shortlist``: the decoder takes ``vocab_ids`` (``engine.shortlist``), added at load
        time unless the graph already has it, so that ``start`` may be given a shortlist."""
        self.shape = shape
        self.provider = resolve_provider(config.provider)
        graph = half_graph(encoder) if config.half_precision else None
        self.encoder = load_session(encoder, self.provider, config, graph)
        self.decoder = load_decoder(decoder, self.provider, config, shortlist=shortlist)
        if self.provider == "cuda" and CUDA not in self.decoder.get_providers():
            # onnxruntime-gpu on a machine without a usable GPU falls back to CPU on its own.
            if config.provider == "cuda":
                raise RunnerError("provider 'cuda' requested but onnxruntime could not initialise CUDA (no GPU?)")
            log.warning("CUDA provider unavailable at run time; running on CPU")
            self.provider = "cpu"
            self.decoder = load_decoder(decoder, self.provider, config, shortlist=shortlist)
        self.device_id = config.device_id
        self.source_names = [output.name for output in self.encoder.get_outputs()]
        self.takes_vocab_ids = VOCAB_IDS in {i.name for i in self.decoder.get_inputs()}
        self.pooled = POSITIONS in {i.name for i in self.decoder.get_inputs()}

    def encode(self, src_ids: np.ndarray) -> Encoded:
        """src_ids (B, S) int64, padded with pad id 0."""
        return Encoded(dict(zip(self.source_names, self.encoder.run(None, {"src_ids": src_ids}), strict=True)))

    def start(
        self, encoded: Encoded, *, alignments: bool, vocab_ids: np.ndarray | None = None
    ) -> HostDecoder | DeviceDecoder:
        """A fresh decoder state for the sentences of ``encoded``, one row each (the search's
        ``select`` makes the beams), scoring only the sorted target ids ``vocab_ids`` if given."""
        state = dict(alignments=alignments, vocab_ids=vocab_ids)
        if self.provider == "cuda":
            return DeviceDecoder(self.decoder, encoded, self.shape, **state, device="cuda", device_id=self.device_id)
        return HostDecoder(self.decoder, encoded, self.shape, **state)


@dataclass(frozen=True)
class Vocabulary:
    """The target ids a decoder state scores: all V (``ids`` None) or a sorted shortlist."""

    size: int  # V
    ids: np.ndarray | None  # (M,) int64
    fed: bool  # the graph takes them as ``vocab_ids``

    @classmethod
    def of(cls, session: ort.InferenceSession, size: int, ids: np.ndarray | None) -> Vocabulary:
        fed = VOCAB_IDS in {i.name for i in session.get_inputs()}
        if ids is not None and not fed:
            raise RunnerError("a shortlist needs a decoder loaded with shortlist=True")
        return cls(size, ids, fed)

    @property
    def width(self) -> int:
        return self.size if self.ids is None else len(self.ids)

    def feed(self) -> dict[str, np.ndarray]:
        if not self.fed:
            return {}
        return {VOCAB_IDS: np.arange(self.size, dtype=np.int64) if self.ids is None else self.ids}

    def widen(self, log_probs: np.ndarray) -> np.ndarray:
        """(N, M) -> (N, V) with -inf outside the shortlist: the search sees a vocabulary of M pieces."""
        if self.ids is None:
            return log_probs
        full = np.full((len(log_probs), self.size), -np.inf, dtype=np.float32)
        full[:, self.ids] = log_probs
        return full


# Cached positions, all rows together, past which a decoder state is large: a full batch (32
# sentences) at the usual beam of 4 gets there only past 128 positions, one at 16 beams past 32. Its
# steps take several times the memory of everyday ones, which onnxruntime's arena would keep as its
# high-water mark and glibc as free heap for the rest of the process's life: each of its steps returns
# the arena's growth when it ends, and the freed heap goes back to the system when the search drops
# the state. Smaller states keep the arena's memory, as shrinking it after every step would cost
# everyday batches their speed (benchmarks/RESULTS.md, section 14).
LARGE_CACHE_POSITIONS = 32 * 4 * 128
_SHRINK_ARENA = ort.RunOptions()
_SHRINK_ARENA.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")


class HostDecoder:
    """Decoder state in host memory (the CPU provider); implements ``engine.decoder.Decoder``."""

    def __init__(
        self,
        session: ort.InferenceSession,
        encoded: Encoded,
        shape: DecoderShape,
        *,
        alignments: bool,
        vocab_ids: np.ndarray | None = None,
    ) -> None:
        self.large = False  # first: __del__ reads it even when the rest fails
        self.session, self.alignments = session, alignments
        self.cache_names = shape.names
        new_cache = [f"new_{name}" for name in self.cache_names]
        self.outputs = ["top_log_probs", "top_ids", *new_cache] + (["alignment"] if alignments else [])
        self.cache = shape.empty(encoded.source["src_mask"].shape[0])
        self.source = encoded.source
        self.vocabulary = Vocabulary.of(session, shape.vocab, vocab_ids)
        self.vocab_ids = self.vocabulary.feed()
        self.chunked_head = ALL_LOG_PROBS in {i.name for i in session.get_inputs()}

    def step(self, tokens: np.ndarray, candidates: int, *, full: bool = True) -> Step:
        width = self.vocabulary.width
        feed = {"tokens": tokens[:, None], "candidates": top_k(candidates, width), **self.cache, **self.source}
        feed |= self.vocab_ids
        if self.chunked_head:
            feed[ALL_LOG_PROBS] = np.array(full)
        rows, _, positions, _ = self.cache[self.cache_names[0]].shape  # (N, H, P, Dh)
        large = rows * positions >= LARGE_CACHE_POSITIONS
        self.large |= large
        names = ["log_probs", *self.outputs] if full else self.outputs
        outputs = self.session.run(names, feed, _SHRINK_ARENA if large else None)
        log_probs = self.vocabulary.widen(outputs.pop(0)) if full else None
        top_log_probs, top_ids, *outputs = outputs
        self.cache = dict(zip(self.cache_names, outputs[: len(self.cache_names)], strict=True))  # (N, H, P+1, Dh)
        return Step(log_probs, top_log_probs, top_ids, outputs[-1] if self.alignments else None)

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        if not is_identity(rows, len(self.cache[self.cache_names[0]])):
            self.cache = {name: np.take(value, rows, axis=0) for name, value in self.cache.items()}
        if sentences is not None:
            self.source = {name: np.take(value, sentences, axis=0) for name, value in self.source.items()}

    def __del__(self) -> None:
        if self.large:
            release_memory()


def top_k(candidates: int, vocab: int) -> np.ndarray:
    """The graph's ``candidates`` input: at least 1 (TopK's rule), at most the vocabulary."""
    return np.array([min(max(candidates, 1), vocab)], dtype=np.int64)


def is_identity(rows: np.ndarray, n: int) -> bool:
    return len(rows) == n and bool(np.all(rows == np.arange(n)))


# ---------------------------------------------------------------------------------------------
# CUDA: IO binding. tests/engine/test_cuda.py runs it on a GPU, the other tests with device="cpu".
# ---------------------------------------------------------------------------------------------


class DeviceDecoder:
    """Decoder state kept in device memory as OrtValues; implements ``engine.decoder.Decoder``.
    ``session``: a decoder graph with the row inputs (``load_decoder`` on CUDA)."""

    def __init__(
        self,
        session: ort.InferenceSession,
        encoded: Encoded,
        shape: DecoderShape,
        *,
        alignments: bool,
        device_id: int,
        vocab_ids: np.ndarray | None = None,
        device: str = "cuda",
    ) -> None:
        if not {CACHE_ROWS, SOURCE_ROWS} <= {i.name for i in session.get_inputs()}:
            raise RunnerError(
                f"DeviceDecoder needs a decoder graph with {CACHE_ROWS} and {SOURCE_ROWS} (engine.step_rows)"
            )
        self.session, self.device, self.device_id = session, device, device_id
        self.alignments = alignments
        self.cache_names = shape.names
        self.vocabulary = Vocabulary.of(session, shape.vocab, vocab_ids)
        sentences = encoded.source["src_mask"].shape[0]
        self.cache = {name: self._upload(value) for name, value in shape.empty(sentences).items()}
        self.source = {name: self._upload(value) for name, value in encoded.source.items()}  # as encoded, for good
        self.vocab_ids = {name: self._upload(ids) for name, ids in self.vocabulary.feed().items()}
        self.rows = np.arange(sentences, dtype=np.int64)  # the next step's cache_rows
        self.sentences = np.arange(sentences, dtype=np.int64)  # its source_rows
        self.source_rows = self._upload(self.sentences)

    def _upload(self, array: np.ndarray) -> ort.OrtValue:
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), self.device, self.device_id)

    def step(self, tokens: np.ndarray, candidates: int, *, full: bool = True) -> Step:
        binding = self.session.io_binding()
        binding.bind_ortvalue_input("tokens", self._upload(tokens[:, None]))
        binding.bind_ortvalue_input(CACHE_ROWS, self._upload(self.rows))
        binding.bind_ortvalue_input(SOURCE_ROWS, self.source_rows)
        binding.bind_cpu_input("candidates", top_k(candidates, self.vocabulary.width))  # TopK reads k on the host
        for name, value in (self.cache | self.source | self.vocab_ids).items():
            binding.bind_ortvalue_input(name, value)
        # Only what the search reads comes to the host; the grown cache stays on the device.
        on_host = ["top_log_probs", "top_ids"] + (["alignment"] if self.alignments else [])
        on_device = [f"new_{name}" for name in self.cache_names] + ([] if self.alignments else ["alignment"])
        (on_host if full else on_device).append("log_probs")
        for name in on_host:
            binding.bind_output(name, "cpu")
        for name in on_device:
            binding.bind_output(name, self.device, self.device_id)
        self.session.run_with_iobinding(binding)
        outputs = dict(zip(on_host + on_device, binding.get_outputs(), strict=True))
        self.cache = {name: outputs[f"new_{name}"] for name in self.cache_names}
        self.rows = np.arange(len(tokens), dtype=np.int64)
        host = {name: outputs[name].numpy() for name in on_host}
        log_probs = self.vocabulary.widen(host["log_probs"]) if full else None
        return Step(log_probs, host["top_log_probs"], host["top_ids"], host.get("alignment"))

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        self.rows = self.rows[rows]  # the next step gathers its cache by them
        if sentences is not None:
            self.sentences = self.sentences[sentences]
            self.source_rows = self._upload(self.sentences)
