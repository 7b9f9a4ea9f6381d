"""The source of an export, loaded and validated before any work is done: a training checkpoint
here, a Hugging Face checkpoint in ``export.hf_import``; both give the pipeline a ``Source``."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.bundle import (
    DecodingDefaults,
    Language,
    Languages,
    SpecialTokens,
    TokenizerFiles,
    TokenizerSide,
    sha256_file,
)
from engine.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer
from export import ExportError
from model.checkpoint import load_checkpoint, model_from_checkpoint
from model.decoding import DecodingOptions
from model.transformer import Transformer

REQUIRED_KEYS = ("model", "model_config", "spm_model", "spm_sha256")
SPM_FILE = "spm.model"
# What requests can name a language by (``engine.languages``): a BCP 47-style tag (or deu_Latn),
# 2-3 letters then subtags. A comma list or a typo would give a bundle serving a pair no request names.
LANGUAGE_CODE = re.compile(r"[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*")


@dataclass
class Source:
    model: Transformer
    tokenizer: Tokenizer  # over tokenizer_files, already written to the bundle's staging directory
    tokenizer_files: TokenizerFiles
    special_tokens: SpecialTokens
    languages: Languages
    decoding: DecodingDefaults
    sha256: str  # of the checkpoint's weights file
    name: str  # the bundle's default name

    @property
    def pair(self) -> tuple[Language, Language]:
        """The first source and target languages: the pair parity and quality checks translate."""
        source = self.languages.source[0]
        return source, next((t for t in self.languages.target if t.code != source.code), self.languages.target[0])


def load_source(path: Path, staging: Path, *, source_language: str | None, target_language: str | None) -> Source:
    """Load ``path`` and check that weights, config and tokenizer belong together; the tokenizer is
    written to ``staging``."""
    if not path.is_file():
        raise ExportError(f"{path}: checkpoint not found")
    try:
        state = load_checkpoint(path)
    except Exception as e:  # torch.load raises many types for a file that is not a checkpoint
        raise ExportError(f"{path}: cannot read the checkpoint: {e}") from e
    if not isinstance(state, dict) or (missing := [k for k in REQUIRED_KEYS if k not in state]):
        raise ExportError(f"{path}: not a model checkpoint (missing {missing if isinstance(state, dict) else 'all'})")
    try:
        model = model_from_checkpoint(state)
    except (TypeError, ValueError, RuntimeError) as e:
        raise ExportError(f"{path}: the stored model config and weights do not fit together: {e}") from e
    tokenizer = _tokenizer(path, state, staging / SPM_FILE)
    cfg = model.config
    if tokenizer.vocab_size != cfg.vocab_size:
        raise ExportError(f"{path}: tokenizer has {tokenizer.vocab_size} pieces, model vocabulary {cfg.vocab_size}")
    if (cfg.pad_id, cfg.bos_id, cfg.eos_id) != (PAD_ID, BOS_ID, EOS_ID) or tokenizer.sp.unk_id() != UNK_ID:
        raise ExportError(f"{path}: special token ids differ from pad={PAD_ID} unk={UNK_ID} bos={BOS_ID} eos={EOS_ID}")
    src_lang, tgt_lang = _languages(path, state, source_language, target_language)
    side = TokenizerSide(model=SPM_FILE)
    decoding = DecodingOptions()
    return Source(
        model=model,
        tokenizer=tokenizer,
        tokenizer_files=TokenizerFiles(source=side, target=side),
        special_tokens=SpecialTokens(pad=PAD_ID, unk=UNK_ID, bos=BOS_ID, eos=EOS_ID),
        languages=Languages(source=[Language(code=src_lang)], target=[Language(code=tgt_lang)]),
        decoding=DecodingDefaults(
            beam_size=decoding.beam_size,
            length_penalty=decoding.length_penalty,
            max_length_a=decoding.max_length_a,
            max_length_b=decoding.max_length_b,
        ),
        sha256=sha256_file(path),
        name=f"mt-{src_lang}-{tgt_lang}",
    )


def _tokenizer(path: Path, state: dict[str, Any], spm_path: Path) -> Tokenizer:
    spm_model: bytes = state["spm_model"]
    if hashlib.sha256(spm_model).hexdigest() != state["spm_sha256"]:
        raise ExportError(f"{path}: the stored sentencepiece model does not match its recorded sha256")
    spm_path.write_bytes(spm_model)
    try:
        return Tokenizer(spm_path)
    except (OSError, RuntimeError, ValueError) as e:
        raise ExportError(f"{path}: unusable sentencepiece model: {e}") from e


def _languages(path: Path, state: dict[str, Any], src: str | None, tgt: str | None) -> tuple[str, str]:
    """Languages from the arguments, else from the training config stored in the checkpoint."""
    train_config = state.get("train_config") or {}
    src, tgt = src or train_config.get("src_lang"), tgt or train_config.get("tgt_lang")
    if not src or not tgt:
        raise ExportError(
            f"{path}: languages unknown (no training config stored); pass --source-lang and --target-lang"
        )
    for side, code in (("source", src), ("target", tgt)):
        if not LANGUAGE_CODE.fullmatch(code):
            raise ExportError(
                f"--{side}-lang {code!r} is not a language code such as de or zh-Hant; a training checkpoint "
                "translates one pair, so one code each"
            )
    if src.lower() == tgt.lower():
        raise ExportError(f"source and target language are both {src!r}: the bundle would serve no pair")
    return src, tgt
