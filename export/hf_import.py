"""Hugging Face checkpoints of the MarianMT (OPUS-MT) and M2M100 (NLLB included) families as export sources.

A checkpoint directory in the ``save_pretrained`` layout (config.json, model.safetensors or
pytorch_model.bin, the tokenizer files, generation_config.json) becomes the same ``Source`` a
training checkpoint does, so the rest of the export is the one pipeline: our ``Transformer`` with
the family's options (``_model_config``) and the checkpoint's weights (``_weights``), checked
against the transformers model itself before anything is exported (``_check_against``), the
tokenizer converted for the torch-free engine, and the checkpoint's generation settings as the
bundle's decoding defaults.

transformers is needed here only (``pip install '.[import]'``); serving never imports it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.bundle import DecodingDefaults, Language, Languages, sha256_file
from engine.tokenizer import Tokenizer
from export import ExportError
from export.hf_tokenizer import ConvertedTokenizer, convert_tokenizer
from export.source import Source
from model.transformer import ModelConfig, Transformer

log = logging.getLogger("export")

SUPPORTED = {"marian": "MarianMT (OPUS-MT)", "m2m_100": "M2M100 (NLLB included)"}
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# model.{encoder,decoder}.layers.{i}.{sublayer}.{parameter} -> ours
LAYER_PARAMETER = re.compile(r"model\.(encoder|decoder)\.layers\.(\d+)\.(\w+?)\.(\w+(?:\.\w+)?)")
_COMMON = {"fc1": "ffn.fc1", "fc2": "ffn.fc2", "final_layer_norm": "ffn_res.norm"}
SUBLAYERS = {
    "encoder": {"self_attn": "self_attn", "self_attn_layer_norm": "attn_res.norm", **_COMMON},
    "decoder": {
        "self_attn": "self_attn",
        "self_attn_layer_norm": "self_res.norm",
        "encoder_attn": "cross_attn",
        "encoder_attn_layer_norm": "cross_res.norm",
        **_COMMON,
    },
}
# Generation settings that change outputs and that the engine does not apply.
IGNORED_GENERATION_SETTINGS = {
    "min_length",
    "min_new_tokens",
    "no_repeat_ngram_size",
    "repetition_penalty",
    "encoder_repetition_penalty",
    "diversity_penalty",
    "num_beam_groups",
    "do_sample",
    "temperature",
    "top_k",
    "top_p",
    "suppress_tokens",
    "begin_suppress_tokens",
    "max_new_tokens",
    "exponential_decay_length_penalty",
}
# The converted model must reproduce the checkpoint's log-probabilities this closely (fp32).
MAX_LOGPROB_DIFF = 1e-4


@dataclass(frozen=True)
class LanguageChoice:
    """--source-lang / --target-lang: the pair of a bilingual checkpoint, or for a multilingual
    one the subset of its languages to serve (None: all)."""

    source: list[str] | None = None
    target: list[str] | None = None


def load_hf_source(directory: Path, staging: Path, languages: LanguageChoice) -> Source:
    """Load, convert and check the checkpoint in ``directory``; tokenizer files go to ``staging``."""
    transformers = _transformers()
    config = _hf_config(transformers, directory)
    model_config = _model_config(config)
    hf_model = transformers.AutoModelForSeq2SeqLM.from_pretrained(directory, dtype=torch.float32).eval()
    model = Transformer(model_config).eval()
    try:
        model.load_state_dict(_weights(hf_model.state_dict(), model_config), strict=True)
    except RuntimeError as e:
        raise ExportError(f"{directory}: the weights do not fit the {config.model_type} layout: {e}") from e
    _check_against(hf_model, model, directory)
    converted = convert_tokenizer(directory, staging, decoder_start_id=model_config.bos_id)
    tokenizer = Tokenizer.from_files(staging, converted.files, converted.special_tokens)
    # NLLB's output layer has rows past the tokenizer's last id; fewer rows than ids cannot work.
    if tokenizer.target_vocab_size > model_config.output_vocab_size:
        raise ExportError(
            f"{directory}: the tokenizer has {tokenizer.target_vocab_size} target ids, "
            f"the model's output only {model_config.output_vocab_size}"
        )
    served = _languages(directory, converted, languages)
    sizes = len(served.source), len(served.target)
    log.info("converted %s (%s): %d source, %d target languages", directory, config.model_type, *sizes)
    return Source(
        model=model,
        tokenizer=tokenizer,
        tokenizer_files=converted.files,
        special_tokens=converted.special_tokens,
        languages=served,
        decoding=_decoding(hf_model.generation_config, model_config),
        sha256=sha256_file(_weights_file(directory)),
        name=directory.resolve().name,
    )


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as e:
        raise ExportError("importing Hugging Face checkpoints needs transformers: pip install '.[import]'") from e
    transformers.logging.set_verbosity_error()
    return transformers


def _hf_config(transformers: Any, directory: Path) -> Any:
    if not (directory / "config.json").is_file():
        raise ExportError(f"{directory}: no config.json (expected a save_pretrained checkpoint directory)")
    _weights_file(directory)
    config = transformers.AutoConfig.from_pretrained(directory)
    if config.model_type not in SUPPORTED:
        supported = ", ".join(f"{k} ({v})" for k, v in SUPPORTED.items())
        raise ExportError(f"{directory}: architecture {config.model_type!r} is not supported; supported: {supported}")
    return config


def _weights_file(directory: Path) -> Path:
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return directory / name
    raise ExportError(f"{directory}: no weights ({' or '.join(WEIGHT_FILES)}); sharded checkpoints are not supported")


def _model_config(config: Any) -> ModelConfig:
    """Our Transformer's options for a MarianMT or M2M100 config; ExportError for what it cannot express."""
    marian = config.model_type == "marian"
    if config.activation_function not in ACTIVATIONS:
        raise ExportError(
            f"activation_function {config.activation_function!r} is not supported; supported: {sorted(ACTIVATIONS)}"
        )
    if config.encoder_attention_heads != config.decoder_attention_heads:
        raise ExportError("encoder and decoder with different numbers of attention heads are not supported")
    if config.encoder_ffn_dim != config.decoder_ffn_dim:
        raise ExportError("encoder and decoder with different feed-forward sizes are not supported")
    target_vocab = getattr(config, "decoder_vocab_size", None) or config.vocab_size
    shared = getattr(config, "share_encoder_decoder_embeddings", True)
    return ModelConfig(
        vocab_size=config.vocab_size,
        target_vocab_size=None if shared else target_vocab,
        d_model=config.d_model,
        n_heads=config.encoder_attention_heads,
        d_ff=config.encoder_ffn_dim,
        n_encoder_layers=config.encoder_layers,
        n_decoder_layers=config.decoder_layers,
        dropout=0.0,
        max_positions=config.max_position_embeddings,
        pre_norm=not marian,  # MarianMT normalises after each residual; M2M100 before, plus a final norm
        tie_embeddings=shared,
        tie_output=getattr(config, "tie_word_embeddings", True),
        scale_embeddings=config.scale_embedding,
        positions="halves" if marian else "fairseq",
        activation=ACTIVATIONS[config.activation_function],  # type: ignore[arg-type]
        final_logits_bias=marian,
        pad_id=config.pad_token_id,
        bos_id=config.decoder_start_token_id,
        eos_id=config.eos_token_id,
    )


def _weights(hf: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """transformers' parameter names -> ours (our tied parameters appear under each of their names)."""
    out = {
        "src_embed.weight": hf["model.encoder.embed_tokens.weight"],
        "tgt_embed.weight": hf["model.decoder.embed_tokens.weight"],
        "output_proj.weight": hf["lm_head.weight"],
    }
    if cfg.final_logits_bias:
        out["final_logits_bias"] = hf["final_logits_bias"].reshape(-1)
    if cfg.pre_norm:
        for side in ("encoder", "decoder"):
            for p in ("weight", "bias"):
                out[f"{side}_norm.{p}"] = hf[f"model.{side}.layer_norm.{p}"]
    for name, tensor in hf.items():
        if (match := LAYER_PARAMETER.fullmatch(name)) and (ours := SUBLAYERS[match[1]].get(match[3])):
            # An unknown sublayer is left out, so the strict load reports the parameters it lacks.
            out[f"{match[1]}_layers.{match[2]}.{ours}.{match[4]}"] = tensor
    return out


@torch.no_grad()
def _check_against(hf_model: Any, model: Transformer, directory: Path) -> None:
    """Teacher-forced log-probabilities of ours and of transformers' model on random ids, padded
    sources included, must agree: a wrong option or weight shows up here, not in translations."""
    cfg = model.config
    gen = torch.Generator().manual_seed(0)
    special = {cfg.pad_id, cfg.bos_id, cfg.eos_id}
    src = _random_ids(gen, (4, 13), cfg.vocab_size, special)
    src[:, -1] = cfg.eos_id
    src[1, 9:] = cfg.pad_id  # one padded source
    tgt = _random_ids(gen, (4, 9), cfg.output_vocab_size, special)
    tgt[:, 0] = cfg.bos_id
    theirs = hf_model(input_ids=src, attention_mask=(src != cfg.pad_id).long(), decoder_input_ids=tgt).logits
    ours = model(src, tgt)
    diff = (ours.log_softmax(-1) - theirs.log_softmax(-1)).abs().max().item()
    log.info("converted model vs transformers: max |dlogp| %.2e", diff)
    if not diff <= MAX_LOGPROB_DIFF:
        raise ExportError(
            f"{directory}: the converted model's log-probabilities differ from transformers' by {diff:.3g} "
            f"(limit {MAX_LOGPROB_DIFF:g}): this checkpoint uses an option the converter does not reproduce"
        )


def _random_ids(gen: torch.Generator, shape: tuple[int, int], vocab: int, special: set[int]) -> torch.Tensor:
    ids = torch.randint(0, vocab, shape, generator=gen)
    for token in special:  # keep special tokens out of the body, as in real text
        ids[ids == token] = (token + 7) % vocab
    return ids


def _languages(directory: Path, converted: ConvertedTokenizer, choice: LanguageChoice) -> Languages:
    """The languages of a side whose codes the checkpoint records (restricted to the choice, if
    any); the choice for a side it does not."""
    known = {
        code: Language(code=_tag(code), model_code=code, tokens=[token])
        for code, token in converted.language_tokens.items()
    }
    if converted.target_tokens_in == "source" and known:  # multilingual OPUS-MT: target languages only
        return Languages(
            source=_given(directory, choice.source, "source"),
            target=_pick(directory, known, choice.target),
            target_tokens_in="source",
        )
    if known:
        return Languages(source=_pick(directory, known, choice.source), target=_pick(directory, known, choice.target))
    return Languages(
        source=_given(directory, choice.source, "source"), target=_given(directory, choice.target, "target")
    )


def _given(directory: Path, codes: list[str] | None, side: str) -> list[Language]:
    """Languages the checkpoint does not record, as --source-lang / --target-lang name them."""
    if not codes:
        raise ExportError(f"{directory}: the checkpoint does not record its {side} languages; pass --{side}-lang")
    return [Language(code=c) for c in codes]


def _pick(directory: Path, known: dict[str, Language], wanted: list[str] | None) -> list[Language]:
    if wanted is None:
        return list(known.values())
    by_name = {name.lower(): lang for lang in known.values() for name in (lang.code, lang.model_code) if name}
    if missing := [w for w in wanted if w.lower() not in by_name]:
        raise ExportError(f"{directory}: the model has no language {missing}; it has {sorted(known)}")
    return [by_name[w.lower()] for w in wanted]


def _tag(code: str) -> str:
    """A model's language code as a short BCP 47 tag: ``deu_Latn`` -> ``de``, ``zho_Hant`` -> ``zh-Hant``."""
    import langcodes

    return langcodes.Language.get(code.strip("_").replace("_", "-")).simplify_script().to_tag()


def _decoding(generation: Any, cfg: ModelConfig) -> DecodingDefaults:
    """The checkpoint's generation settings that shape output, as the bundle's decoding defaults.

    Only settings the checkpoint sets count (transformers' own defaults, such as max_length 20,
    are not the model's); settings the engine does not reproduce are named in a warning.
    """
    explicit = generation.to_diff_dict()
    if explicit.get("forced_bos_token_id") is not None:
        raise ExportError("a generation config with forced_bos_token_id is not supported")
    banned = []
    for words in explicit.get("bad_words_ids") or []:
        if len(words) != 1:
            raise ExportError(f"bad_words_ids of more than one token are not supported: {words}")
        banned.append(int(words[0]))
    forced_eos = explicit.get("forced_eos_token_id")
    if forced_eos not in (None, cfg.eos_id):
        raise ExportError(f"forced_eos_token_id {forced_eos} is not the EOS id {cfg.eos_id}")
    if ignored := sorted(set(explicit) & IGNORED_GENERATION_SETTINGS):
        log.warning("generation settings not reproduced by the engine (ignored): %s", ", ".join(ignored))
    defaults = DecodingDefaults()
    max_length = explicit.get("max_length")
    return DecodingDefaults(
        beam_size=explicit.get("num_beams", defaults.beam_size),
        length_penalty=explicit.get("length_penalty", defaults.length_penalty),
        # transformers' max_length counts the decoder's start token; ours counts generated tokens.
        max_length=max_length - 1 if max_length else None,
        forced_eos="zero_score" if forced_eos is not None else "off",
        banned_ids=banned,
        renormalize=bool(explicit.get("renormalize_logits", False)),
    )
