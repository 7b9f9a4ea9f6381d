"""The model bundle: loading and validating the directory that ``python -m export`` writes.

A bundle is ``manifest.json`` + the tokenizer files + the ONNX graphs (see docs/architecture.md).
Loading checks, in order, that the manifest parses and has a schema version this code reads, that
every file it names exists and has the recorded sha256, and that each graph's inputs and outputs
have the expected names, element types and ranks, static dimensions that agree with the manifest,
and dynamic batch/length axes. Any failure raises ``BundleError`` naming the file and what is wrong.

The graph signatures below are the single definition of the ONNX contract: the exporter builds its
input/output names and dynamic axes from them. This module must not import torch (nor ``onnx``):
graphs are inspected through onnxruntime session metadata.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import onnxruntime as ort
from pydantic import BaseModel, ConfigDict, Field, ValidationError

# 2: per-layer cache and cross keys/values (1 stacked them), TopK outputs.
# 3: language lists with language tokens, tokenizer files per side, the forced-EOS convention; a
#    version 2 manifest is read as the equivalent version 3 one.
SCHEMA_VERSION = 3
MANIFEST = "manifest.json"


class BundleError(Exception):
    """The bundle is missing, incomplete, corrupted, or does not match this code's contract."""


# ---------------------------------------------------------------------------------------------
# Graph signatures. Dimension symbols: static ones are resolved from the manifest's dimensions,
# dynamic ones (batch and length axes) must be left symbolic in the graph.
# ---------------------------------------------------------------------------------------------

DYNAMIC_DIMS = frozenset({"B", "S", "N", "P", "P+1", "C", "M", "W", "W+1", "Q"})


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: Literal["int64", "float", "bool"]
    dims: tuple[str, ...]


Signature = tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]  # inputs, outputs


def per_layer(name: str, layers: int) -> list[str]:
    """The names of a per-layer tensor: ``cross_k`` -> ``cross_k_0`` ... ``cross_k_{L-1}``."""
    return [f"{name}_{i}" for i in range(layers)]


def _layer_specs(
    names: tuple[str, ...], layers: int, dims: tuple[str, ...], dtype: str = "float"
) -> tuple[TensorSpec, ...]:
    return tuple(TensorSpec(n, dtype, dims) for name in names for n in per_layer(name, layers))


def encoder_signature(layers: int) -> Signature:
    """src_ids -> cross keys and values, one tensor per decoder layer (all keys, then all values), src_mask."""
    outputs = (
        *_layer_specs(("cross_k", "cross_v"), layers, ("B", "H", "S", "Dh")),
        TensorSpec("src_mask", "bool", ("B", "S")),
    )
    return (TensorSpec("src_ids", "int64", ("B", "S")),), outputs


# The step's rows and sentences, picked by the step itself on the CUDA path (``engine.step_rows``).
ROW_INPUTS = (TensorSpec("cache_rows", "int64", ("N",)), TensorSpec("source_rows", "int64", ("B",)))


# The row pool's step (``engine.pool_graph``): each row's position (its cached positions in the
# pool's buffers of W), and where its cross-attention query and answer go among the sentence
# slots' Q = slots x rows per slot.
POOL_INPUTS = (
    TensorSpec("positions", "int64", ("N",)),
    TensorSpec("query_slots", "int64", ("Q",)),
    TensorSpec("row_slots", "int64", ("N",)),
    # GroupQueryAttention's total length, read on the host: the longest row's with its new position,
    # or the buffer's width W (the same outputs: each row reads its own positions)
    TensorSpec("total_length", "int32", ()),
)
# The step whose head can run a few rows at a time (``engine.step_head``): whether this step
# returns all N x V log-probabilities (otherwise ``log_probs`` is (0, V)).
CHUNKED_HEAD_INPUT = TensorSpec("all_log_probs", "bool", ())


def decoder_signature(
    layers: int,
    *,
    shortlist: bool = False,
    row_inputs: bool = False,
    pool: bool = False,
    half_cache: bool = False,
    chunked_head: bool = False,
) -> Signature:
    """One step. The caches are one tensor per layer so that the graph reads and writes each
    layer's keys/values in place of splitting and re-stacking one (L, ...) tensor every step.
    ``top_log_probs``/``top_ids`` are each row's best ``candidates`` tokens (ONNX TopK: best first,
    lower id first among equal values), so that the search need not scan all V per row.
    ``shortlist``: the graph scores only the M target ids ``vocab_ids`` (``engine.shortlist``).
    ``row_inputs``: it gathers its cache and source by ``ROW_INPUTS`` first. ``pool``: the row
    pool's step (``POOL_INPUTS``), which writes the new position into its cache of W positions in
    place and returns that cache; ``half_cache``: that cache in float16 (``engine.pool_graph``, for
    CUDA). ``chunked_head``: it takes ``CHUNKED_HEAD_INPUT``. The engine adds these inputs when it
    loads a graph."""
    cache = "float16" if half_cache else "float"
    inputs = (
        TensorSpec("tokens", "int64", ("N", "1")),
        *_layer_specs(("self_k", "self_v"), layers, ("N", "H", "W" if pool else "P", "Dh"), cache),
        *encoder_signature(layers)[1],
        TensorSpec("candidates", "int64", ("1",)),
        *([TensorSpec("vocab_ids", "int64", ("M",))] if shortlist else []),
        *(ROW_INPUTS if row_inputs else ()),
        *(POOL_INPUTS if pool else ()),
        *((CHUNKED_HEAD_INPUT,) if chunked_head else ()),
    )
    grown = ("present_k", "present_v") if pool else ("new_self_k", "new_self_v")
    outputs = (
        TensorSpec("log_probs", "float", ("N", "M" if shortlist else "V")),
        *_layer_specs(grown, layers, ("N", "H", "W" if pool else "P+1", "Dh"), cache),
        TensorSpec("alignment", "float", ("N", "S")),
        TensorSpec("top_log_probs", "float", ("N", "C")),
        TensorSpec("top_ids", "int64", ("N", "C")),
    )
    return inputs, outputs


SIGNATURES = {"encoder": encoder_signature, "decoder": decoder_signature}


# ---------------------------------------------------------------------------------------------
# Manifest schema (docs/architecture.md). Unknown keys are rejected so that typos surface here.
# ---------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpecialTokens(_Strict):
    pad: int = 0
    unk: int = 1
    bos: int = 2  # the decoder's start token (MarianMT starts from pad, NLLB from eos)
    eos: int = 3


class Language(_Strict):
    code: str  # how requests and responses name it: ISO 639-1 where it has such a code ("de")
    model_code: str | None = None  # the model's own name for it ("deu_Latn"), accepted as well
    # Its language token(s): put before a source text in this language; forced, at log-probability
    # 0, as the first generated tokens of a translation into it (NLLB's convention).
    tokens: list[int] = Field(default_factory=list)


class Languages(_Strict):
    """Every source language is served into every target language other than itself."""

    source: list[Language] = Field(min_length=1)
    target: list[Language] = Field(min_length=1)
    # Where a target language's tokens go: forced as the first generated tokens (NLLB), or before
    # the source text, after the source language's own (multilingual OPUS-MT models' ">>fra<<").
    target_tokens_in: Literal["output", "source"] = "output"


class TokenizerSide(_Strict):
    model: str  # sentencepiece model file that splits text into pieces (source) or joins them (target)
    vocab: str | None = None  # JSON {piece: id}; None: the sentencepiece model's own ids


class TokenizerFiles(_Strict):
    source: TokenizerSide
    target: TokenizerSide


class Dimensions(_Strict):
    encoder_layers: int = Field(gt=0)
    decoder_layers: int = Field(gt=0)
    heads: int = Field(gt=0)
    d_model: int = Field(gt=0)
    d_head: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    max_positions: int = Field(gt=0)


class Quality(_Strict):
    bleu: float
    chrf: float
    beam_size: int
    sentences: int | None = None
    seconds: float | None = None  # wall time of the translation on the exporting machine (CPU)
    bleu_signature: str
    chrf_signature: str


class Variant(_Strict):
    encoder: str
    decoder: str
    quality: dict[str, Quality] = Field(default_factory=dict)  # by test set name


class DefaultVariant(_Strict):
    cpu: str = "fp32"
    cuda: str = "fp32"


class AlignmentInfo(_Strict):
    layer: int = Field(ge=0)
    heads: str  # human-readable: which heads the graph averages, e.g. "mean of all"


class DecodingDefaults(_Strict):
    beam_size: int = Field(default=4, gt=0)
    length_penalty: float = 1.0
    max_length_a: float = 1.5
    max_length_b: int = 10
    max_length: int | None = Field(default=None, gt=0)  # cap on generated tokens, EOS included
    # A span of up to 8 generated pieces occurs at most this many times in a row (engine.rules.NoRepeatLoop);
    # 0: no limit. 2 ends the loops of a model out of its depth (40% of odd inputs to mt-en-de loop,
    # 0.5% with it) at no BLEU cost on test_2016_flickr (benchmarks/RESULTS.md, section 8).
    max_consecutive_repeats: int = Field(default=2, ge=0)
    # At a sentence's last allowed step: "model_score" forces EOS with the log-probability the model
    # gives it (this project's models); "zero_score" forces it at log-probability 0 (transformers'
    # forced_eos_token_id); "off" forces nothing, and the hypotheses alive end there (transformers
    # without it).
    forced_eos: Literal["model_score", "zero_score", "off"] = "model_score"
    banned_ids: list[int] = Field(default_factory=list)  # never generated (the decoder graph masks them)
    # Whether the other tokens' log-probabilities are renormalised once banned_ids are out
    # (transformers' renormalize_logits); else they keep the values the model gives them.
    renormalize: bool = False


class Parity(_Strict):
    sentences: int
    positions: int = 0  # target positions compared
    max_abs_logprob_diff: float  # ONNX cached step vs PyTorch incremental step
    max_abs_cache_vs_full_diff: float | None = None  # ONNX cached step vs PyTorch full recomputation
    max_abs_alignment_diff: float | None = None
    tolerance: float | None = None
    int8_max_abs_logprob_diff: float | None = None  # reported, not bounded: int8 is approximate
    int8_greedy_token_agreement: float | None = None


class ExportInfo(_Strict):
    created_at: str
    checkpoint_sha256: str
    opset: int
    torch_version: str
    onnxruntime_version: str
    parameters: int


class ModelCard(_Strict):
    """What the model was trained on and where it can be trusted, in a sentence each: the service
    logs it at start and the web page shows it beside the model's name (a model card's summary)."""

    trained_on: str
    reliable_for: str
    url: str | None = None  # the full model card, when it is published somewhere


class ShortlistInfo(_Strict):
    """The vocabulary shortlist (``engine.shortlist``): its file holds each source piece's ``k``
    likeliest target pieces and the ``frequent`` most frequent ones."""

    file: str  # .npz
    k: int = Field(gt=0)
    frequent: int = Field(ge=0)
    # Whether requests use it unless they say otherwise: only where it keeps BLEU within 0.2 of the
    # full vocabulary on a held-out set (``bleu``: {"full": ..., "shortlist": ...} per set).
    default: bool
    bleu: dict[str, dict[str, float]] = Field(default_factory=dict)


class Manifest(_Strict):
    schema_version: int
    name: str
    version: str
    languages: Languages
    special_tokens: SpecialTokens
    dimensions: Dimensions
    tokenizer: TokenizerFiles
    variants: dict[str, Variant] = Field(min_length=1)
    default_variant: DefaultVariant
    files: dict[str, str]
    alignment: AlignmentInfo
    decoding: DecodingDefaults
    parity: Parity
    export: ExportInfo | None = None
    card: ModelCard | None = None
    shortlist: ShortlistInfo | None = None

    def dimension_values(self) -> dict[str, int]:
        """The static dimension symbols of the graph signatures."""
        d = self.dimensions
        return {"L": d.decoder_layers, "H": d.heads, "Dh": d.d_head, "V": d.vocab_size, "1": 1}


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    path: Path
    manifest: Manifest

    def graph_paths(self, variant: str) -> tuple[Path, Path]:
        """(encoder, decoder) paths of ``variant``; BundleError if the bundle has no such variant."""
        if variant not in self.manifest.variants:
            raise BundleError(f"{self.path}: no variant {variant!r} (available: {sorted(self.manifest.variants)})")
        v = self.manifest.variants[variant]
        return self.path / v.encoder, self.path / v.decoder


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_bundle(path: str | Path, *, verify_checksums: bool = True, check_graphs: bool = True) -> Bundle:
    """Load and validate the bundle in directory ``path``; raises BundleError on any problem."""
    root = Path(path)
    manifest = read_manifest(root)
    _check_files(root, manifest, verify_checksums=verify_checksums)
    bundle = Bundle(root, manifest)
    if check_graphs:
        for variant in manifest.variants:
            for kind, graph in zip(("encoder", "decoder"), bundle.graph_paths(variant), strict=True):
                check_graph(_inspection_session(graph), kind, manifest, where=str(graph))
    return bundle


def read_manifest(root: Path) -> Manifest:
    path = root / MANIFEST
    if not root.is_dir():
        raise BundleError(f"{root}: bundle directory does not exist")
    if not path.is_file():
        raise BundleError(f"{path}: missing (not a model bundle?)")
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BundleError(f"{path}: not valid JSON: {e}") from e
    # The version decides how to read the rest, so it is checked before the schema.
    version = raw.get("schema_version") if isinstance(raw, dict) else None
    if version == 2:
        raw = _upgrade_v2(raw)
    elif version != SCHEMA_VERSION:
        raise BundleError(
            f"{path}: unknown schema_version {version!r}; this loader reads version {SCHEMA_VERSION} "
            "(re-export the checkpoint with python -m export)"
        )
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise BundleError(f"{path}: invalid manifest: {problems}") from e
    _check_consistency(path, manifest)
    return manifest


def _upgrade_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """A version 2 manifest (one language pair, one joint sentencepiece model) as version 3."""
    raw = dict(raw, schema_version=SCHEMA_VERSION)
    source, target = raw.pop("source_language", None), raw.pop("target_language", None)
    raw["languages"] = {"source": [{"code": source}], "target": [{"code": target}]}
    spm = raw.get("tokenizer")
    raw["tokenizer"] = {"source": {"model": spm}, "target": {"model": spm}}
    return raw


def tokenizer_file_names(files: TokenizerFiles) -> set[str]:
    return {name for side in (files.source, files.target) for name in (side.model, side.vocab) if name}


def _check_consistency(path: Path, manifest: Manifest) -> None:
    graphs = {f for v in manifest.variants.values() for f in (v.encoder, v.decoder)}
    named = (
        tokenizer_file_names(manifest.tokenizer) | graphs | ({manifest.shortlist.file} if manifest.shortlist else set())
    )
    if unlisted := sorted(named - set(manifest.files)):
        raise BundleError(f"{path}: files {unlisted} are used but have no checksum in 'files'")
    for device, variant in manifest.default_variant.model_dump().items():
        if variant not in manifest.variants:
            raise BundleError(f"{path}: default_variant.{device} is {variant!r}, which is not among the variants")
    d = manifest.dimensions
    if d.heads * d.d_head != d.d_model:
        raise BundleError(f"{path}: dimensions: heads {d.heads} x d_head {d.d_head} != d_model {d.d_model}")
    if manifest.alignment.layer >= d.decoder_layers:
        raise BundleError(f"{path}: alignment layer {manifest.alignment.layer} >= decoder_layers {d.decoder_layers}")
    for side in ("source", "target"):
        languages = getattr(manifest.languages, side)
        names = [n for lang in languages for n in (lang.code, lang.model_code) if n]
        if len(names) != len(set(names)):
            raise BundleError(f"{path}: languages.{side} names a language twice")


def _check_files(root: Path, manifest: Manifest, *, verify_checksums: bool) -> None:
    for name, expected in manifest.files.items():
        file = root / name
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise BundleError(f"{root}: file name {name!r} points outside the bundle")
        if not file.is_file():
            raise BundleError(f"{file}: missing (listed in {MANIFEST})")
        if verify_checksums and (actual := sha256_file(file)) != expected:
            raise BundleError(f"{file}: sha256 mismatch (manifest {expected[:12]}…, file {actual[:12]}…): corrupted?")


def _inspection_session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    # Only the metadata is read: skip graph optimisation so that checking is quick.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types for unreadable graphs
        raise BundleError(f"{path}: onnxruntime cannot load the graph: {e}") from e


def check_graph(session: ort.InferenceSession, kind: str, manifest: Manifest, *, where: str) -> None:
    """Check a session's inputs/outputs against the ``kind`` ("encoder"/"decoder") signature.

    The engine may call this on its own sessions; ``where`` names the graph in error messages.
    """
    dims = manifest.dimension_values()
    inputs, outputs = SIGNATURES[kind](dims["L"])
    if kind == "decoder":  # as the engine loaded it: with the inputs it adds, if it added them
        given = {i.name for i in session.get_inputs()}
        row_inputs = {spec.name for spec in ROW_INPUTS} <= given
        pool = {spec.name for spec in POOL_INPUTS} <= given
        half_cache = any(i.name == "self_k_0" and i.type == "tensor(float16)" for i in session.get_inputs())
        inputs, outputs = decoder_signature(
            dims["L"],
            shortlist="vocab_ids" in given,
            row_inputs=row_inputs,
            pool=pool,
            half_cache=half_cache,
            chunked_head=CHUNKED_HEAD_INPUT.name in given,
        )
    _check_args(where, "input", session.get_inputs(), inputs, dims)
    _check_args(where, "output", session.get_outputs(), outputs, dims)


def _check_args(
    where: str, role: str, actual: list[Any], expected: tuple[TensorSpec, ...], dims: dict[str, int]
) -> None:
    names = [a.name for a in actual]
    if names != [s.name for s in expected]:
        raise BundleError(f"{where}: {role}s are {names}, expected {[s.name for s in expected]}")
    for arg, spec in zip(actual, expected, strict=True):
        if arg.type != f"tensor({spec.dtype})":
            raise BundleError(f"{where}: {role} {spec.name!r} has type {arg.type}, expected tensor({spec.dtype})")
        if len(arg.shape) != len(spec.dims):
            raise BundleError(f"{where}: {role} {spec.name!r} has rank {len(arg.shape)}, expected {len(spec.dims)}")
        for axis, (got, symbol) in enumerate(zip(arg.shape, spec.dims, strict=True)):
            if not isinstance(got, int):
                continue  # symbolic or unknown: any size is accepted
            if symbol in DYNAMIC_DIMS:
                raise BundleError(
                    f"{where}: {role} {spec.name!r} axis {axis} ({symbol}) is fixed at {got}, must be dynamic"
                )
            if got != dims[symbol]:
                raise BundleError(
                    f"{where}: {role} {spec.name!r} axis {axis} ({symbol}) is {got}, manifest says {dims[symbol]}"
                )
