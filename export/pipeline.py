"""The export pipeline: load -> validate -> export -> optimize -> quantize -> parity -> write bundle.

One fixed sequence of steps (numbered below), each failing with an ``ExportError`` that says what
went wrong. Nothing reaches ``out`` unless every step passed: work happens in a staging directory
that replaces ``out`` at the very end.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import onnxruntime as ort
import torch

from engine.bundle import (
    SCHEMA_VERSION,
    AlignmentInfo,
    DefaultVariant,
    Dimensions,
    ExportInfo,
    Manifest,
    Parity,
    Variant,
    tokenizer_file_names,
)
from export import ExportError
from export.bundle_writer import checksums, commit, prepare_output, write_manifest
from export.decoder_step import OutputConstraints
from export.graph_files import external_data, share_weights
from export.graphs import OPSET, export_graphs
from export.parity import OnnxGreedy, ParityReport, check_parity, one_torch_thread
from export.quality import MAX_INT8_BLEU_LOSS, MIN_INT8_SPEEDUP, TestSet, cpu_default, measure, with_quality
from export.quantize import optimize, quantize
from export.samples import SAMPLE_SENTENCES
from export.source import Source, load_source
from model.data import CorpusError, read_lines
from model.transformer import count_parameters

log = logging.getLogger("export")

MIN_PARITY_SENTENCES = 50
GRAPH_FILES = {"fp32": ("encoder.onnx", "decoder.onnx"), "int8": ("encoder.int8.onnx", "decoder.int8.onnx")}
# int8 is approximate, so it has no tolerance; these only catch a broken graph.
INT8_MAX_LOGSUMEXP = 1e-3


@dataclass(frozen=True)
class ExportConfig:
    checkpoint: Path | None  # a training checkpoint (.pt), or
    out: Path
    hf_model: Path | None = None  # a Hugging Face checkpoint directory
    int8: bool = False
    force: bool = False
    eval_data: Path | None = None  # directory with {val,test_2016_flickr}.{src,tgt}
    parity_data: Path | None = None  # source sentences, one per line
    name: str | None = None  # default mt-{src}-{tgt}
    version: str = "1.0.0"
    # Default: from the checkpoint. Comma-separated: the languages of a multilingual model to serve.
    source_language: str | None = None
    target_language: str | None = None
    alignment_layer: int | None = None  # default: the second-to-last decoder layer
    alignment_heads: int = 0  # average the first N heads; 0 = all
    parity_sentences: int = 64
    parity_tolerance: float = 1e-4
    eval_beam_size: int = 5
    max_int8_bleu_loss: float = MAX_INT8_BLEU_LOSS  # export.quality.cpu_default
    min_int8_speedup: float = MIN_INT8_SPEEDUP

    def __post_init__(self) -> None:
        if (self.checkpoint is None) == (self.hf_model is None):
            raise ExportError("give either a training checkpoint or a Hugging Face checkpoint directory")
        if self.parity_sentences < MIN_PARITY_SENTENCES:
            raise ExportError(f"parity needs at least {MIN_PARITY_SENTENCES} sentences, got {self.parity_sentences}")
        if not self.parity_tolerance > 0:
            raise ExportError(f"the parity tolerance must be positive, got {self.parity_tolerance}")
        if self.eval_beam_size < 1 or self.alignment_heads < 0:
            raise ExportError("--eval-beam-size must be at least 1 and --alignment-heads at least 0")
        # The service reports the version (mt_model_info, /v1/models): an empty one names nothing.
        for option, value in (("--name", self.name), ("--version", self.version)):
            if value is not None and not value.strip():
                raise ExportError(f"{option} {value!r} must not be blank")


@dataclass
class ExportResult:
    out: Path
    manifest: Manifest
    parity: dict[str, ParityReport] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # bytes per file


def export_bundle(config: ExportConfig) -> ExportResult:
    # Absolute: ``--out .`` has no name to stage beside, and the bundle is swapped in by renaming.
    config = dataclasses.replace(config, out=config.out.absolute())
    staging = prepare_output(config.out, force=config.force)
    try:
        with one_torch_thread():
            result = _run(config, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result


def _run(config: ExportConfig, staging: Path) -> ExportResult:
    # 1) load and validate the checkpoint (the tokenizer lands in the bundle as it is checked)
    source = _load(config, staging)
    alignment_layer = _alignment_layer(config, source)
    parity_ids = _parity_sources(config, source)
    test_set = None
    if config.eval_data is not None:
        test_set = TestSet.load(config.eval_data, *(lang.code for lang in source.pair))
    log.info("loaded %s: %d parameters", config.checkpoint or config.hf_model, count_parameters(source.model))

    # 2) export, 3) optimise, 4) quantise
    variants = ["fp32", "int8"] if config.int8 else ["fp32"]
    with tempfile.TemporaryDirectory() as raw_dir:
        raw = export_graphs(
            source.model,
            Path(raw_dir),
            alignment_layer=alignment_layer,
            alignment_heads=config.alignment_heads,
            constraints=_constraints(source),
        )
        for raw_graph, name in zip(raw, GRAPH_FILES["fp32"], strict=True):
            optimize(raw_graph, staging / name)
        if config.int8:
            for raw_graph, name in zip(raw, GRAPH_FILES["int8"], strict=True):
                quantize(raw_graph, staging / name)
    for v in variants:
        encoder, decoder = (staging / name for name in GRAPH_FILES[v])
        if shared := share_weights(encoder, decoder):
            log.info("%s: %d weights of the decoder read from the encoder's file", v, shared)
    log.info("exported graphs (opset %d): %s", OPSET, ", ".join(n for v in variants for n in GRAPH_FILES[v]))

    # 5) parity
    reports = {v: _parity(source, staging, v, parity_ids, alignment_layer, config) for v in variants}
    _check_parity(config, reports)

    # 6) write the bundle, 7) measure quality with the service's engine on the staged bundle
    manifest = _manifest(config, source, staging, variants, alignment_layer, reports)
    write_manifest(staging, manifest)
    if test_set is not None:
        manifest = _with_quality(config, test_set, staging, manifest)
        write_manifest(staging, manifest)
    sizes = {name: (staging / name).stat().st_size for name in manifest.files}
    commit(staging, config.out)
    return ExportResult(config.out, manifest, reports, sizes)


def _load(config: ExportConfig, staging: Path) -> Source:
    if config.checkpoint is not None:
        return load_source(
            config.checkpoint,
            staging,
            source_language=config.source_language,
            target_language=config.target_language,
        )
    from export.hf_import import LanguageChoice, load_hf_source  # imports transformers

    assert config.hf_model is not None
    choice = LanguageChoice(_codes(config.source_language), _codes(config.target_language))
    return load_hf_source(config.hf_model, staging, choice)


def _constraints(source: Source) -> OutputConstraints:
    d = source.decoding
    return OutputConstraints(source.model.config.output_vocab_size, d.banned_ids, renormalize=d.renormalize)


def _codes(value: str | None) -> list[str] | None:
    return [code.strip() for code in value.split(",") if code.strip()] if value else None


def _alignment_layer(config: ExportConfig, source: Source) -> int:
    layers, heads = source.model.config.n_decoder_layers, source.model.config.n_heads
    layer = max(0, layers - 2) if config.alignment_layer is None else config.alignment_layer
    if not 0 <= layer < layers:
        raise ExportError(f"--alignment-layer {layer} is out of range: the model has {layers} decoder layers")
    if not 0 <= config.alignment_heads <= heads:
        raise ExportError(f"--alignment-heads {config.alignment_heads} is out of range 0..{heads}")
    return layer


def _parity_sources(config: ExportConfig, source: Source) -> list[list[int]]:
    """Token ids of the parity sentences: --parity-data, else the eval data's val set, else built-ins."""
    if config.parity_data is not None:
        path: Path | None = config.parity_data
    elif config.eval_data is not None:
        path = config.eval_data / f"val.{source.pair[0].code}"
    else:
        path = None
    if path is not None and not path.is_file():
        raise ExportError(f"{path}: parity sentences not found")
    try:
        lines = read_lines(path) if path else SAMPLE_SENTENCES
    except CorpusError as e:
        raise ExportError(f"parity sentences: {e}") from e
    texts = [t for t in lines if t.strip()][: config.parity_sentences]
    if len(texts) < MIN_PARITY_SENTENCES:
        raise ExportError(
            f"parity needs at least {MIN_PARITY_SENTENCES} sentences, {path or 'built-ins'} has {len(texts)}"
        )
    return source.tokenizer.encode_batch(texts, prefix=source.pair[0].tokens)


def _parity(
    source: Source, staging: Path, variant: str, ids: list[list[int]], alignment_layer: int, config: ExportConfig
) -> ParityReport:
    encoder, decoder = (staging / name for name in GRAPH_FILES[variant])
    specials = source.special_tokens
    greedy = OnnxGreedy(encoder, decoder, eos_id=specials.eos, pad_id=specials.pad, bos_id=specials.bos)
    report = check_parity(
        source.model,
        greedy,
        ids,
        alignment_layer=alignment_layer,
        alignment_heads=config.alignment_heads,
        constraints=_constraints(source),
    )
    log.info(
        "parity %s: %d sentences, %d positions, max |dlogp| %.2e (cached step vs PyTorch), %.2e (vs full recompute)",
        variant,
        report.sentences,
        report.positions,
        report.max_abs_logprob_diff,
        report.max_abs_cache_vs_full_diff,
    )
    return report


def _check_parity(config: ExportConfig, reports: dict[str, ParityReport]) -> None:
    fp32 = reports["fp32"]
    if not fp32.worst() <= config.parity_tolerance:
        raise ExportError(
            f"parity failed: ONNX and PyTorch log-probabilities differ by up to {fp32.worst():.3g} "
            f"(cached step vs PyTorch step {fp32.max_abs_logprob_diff:.3g}, vs full recomputation "
            f"{fp32.max_abs_cache_vs_full_diff:.3g}) over {fp32.positions} positions of {fp32.sentences} "
            f"sentences; the tolerance is {config.parity_tolerance:g}"
        )
    if (int8 := reports.get("int8")) and not int8.max_abs_logsumexp <= INT8_MAX_LOGSUMEXP:
        raise ExportError(f"int8 graphs are broken: their log-probabilities are off by {int8.max_abs_logsumexp:.3g}")


def _parity_summary(config: ExportConfig, reports: dict[str, ParityReport]) -> Parity:
    fp32, int8 = reports["fp32"], reports.get("int8")
    agreement = None
    if int8 is not None:
        same = sum(a == b for a, b in zip(fp32.outputs, int8.outputs, strict=True))
        agreement = round(same / len(fp32.outputs), 4)
    return Parity(
        sentences=fp32.sentences,
        positions=fp32.positions,
        max_abs_logprob_diff=fp32.max_abs_logprob_diff,
        max_abs_cache_vs_full_diff=fp32.max_abs_cache_vs_full_diff,
        max_abs_alignment_diff=fp32.max_abs_alignment_diff,
        tolerance=config.parity_tolerance,
        int8_max_abs_logprob_diff=int8.max_abs_logprob_diff if int8 else None,
        int8_greedy_token_agreement=agreement,
    )


def _manifest(
    config: ExportConfig,
    source: Source,
    staging: Path,
    variants: list[str],
    alignment_layer: int,
    reports: dict[str, ParityReport],
) -> Manifest:
    cfg = source.model.config
    heads = "mean of all" if config.alignment_heads == 0 else f"mean of the first {config.alignment_heads}"
    graphs = [staging / name for v in variants for name in GRAPH_FILES[v]]
    weights = [external_data(g) for g in graphs if external_data(g).is_file()]
    files = sorted(tokenizer_file_names(source.tokenizer_files)) + [f.name for f in graphs + weights]
    return Manifest(
        schema_version=SCHEMA_VERSION,
        name=config.name or source.name,
        version=config.version,
        languages=source.languages,
        special_tokens=source.special_tokens,
        dimensions=Dimensions(
            encoder_layers=cfg.n_encoder_layers,
            decoder_layers=cfg.n_decoder_layers,
            heads=cfg.n_heads,
            d_model=cfg.d_model,
            d_head=cfg.d_head,
            vocab_size=cfg.output_vocab_size,
            max_positions=cfg.max_positions,
        ),
        tokenizer=source.tokenizer_files,
        variants={v: Variant(encoder=GRAPH_FILES[v][0], decoder=GRAPH_FILES[v][1]) for v in variants},
        default_variant=DefaultVariant(cpu="fp32", cuda="fp32"),
        files=checksums(staging, files),
        alignment=AlignmentInfo(layer=alignment_layer, heads=heads),
        decoding=source.decoding,
        parity=_parity_summary(config, reports),
        export=ExportInfo(
            created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            checkpoint_sha256=source.sha256,
            opset=OPSET,
            torch_version=torch.__version__,
            onnxruntime_version=ort.__version__,
            parameters=count_parameters(source.model),
        ),
    )


def _with_quality(config: ExportConfig, test_set: TestSet, staging: Path, manifest: Manifest) -> Manifest:
    """Measure every variant on the test set and choose the default CPU variant from the result."""
    qualities = measure(staging, list(manifest.variants), test_set, beam_size=config.eval_beam_size)
    for name, q in qualities.items():
        log.info("quality %s on %s: BLEU %.2f chrF %.2f in %.1f s", name, test_set.name, q.bleu, q.chrf, q.seconds)
    default = cpu_default(
        qualities, max_int8_bleu_loss=config.max_int8_bleu_loss, min_int8_speedup=config.min_int8_speedup
    )
    log.info("default CPU variant: %s", default)
    return with_quality(manifest, qualities, test_set.name, default)
