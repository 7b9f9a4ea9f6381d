"""The source of an export: a training checkpoint, loaded and validated before any work is done."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.bundle import sha256_file
from engine.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer
from export import ExportError
from model.checkpoint import load_checkpoint, model_from_checkpoint
from model.transformer import Transformer

REQUIRED_KEYS = ("model", "model_config", "spm_model", "spm_sha256")


@dataclass
class Source:
    model: Transformer
    spm_model: bytes
    tokenizer: Tokenizer
    sha256: str  # of the checkpoint file
    source_language: str
    target_language: str


def load_source(path: Path, spm_path: Path, *, source_language: str | None, target_language: str | None) -> Source:
    """Load ``path`` and check that weights, config and tokenizer belong together; the tokenizer is
    written to ``spm_path``."""
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
    tokenizer = _tokenizer(path, state, spm_path)
    cfg = model.config
    if tokenizer.vocab_size != cfg.vocab_size:
        raise ExportError(f"{path}: tokenizer has {tokenizer.vocab_size} pieces, model vocabulary {cfg.vocab_size}")
    if (cfg.pad_id, cfg.bos_id, cfg.eos_id) != (PAD_ID, BOS_ID, EOS_ID) or tokenizer.sp.unk_id() != UNK_ID:
        raise ExportError(f"{path}: special token ids differ from pad={PAD_ID} unk={UNK_ID} bos={BOS_ID} eos={EOS_ID}")
    src_lang, tgt_lang = _languages(path, state, source_language, target_language)
    return Source(model, state["spm_model"], tokenizer, sha256_file(path), src_lang, tgt_lang)


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
    return src, tgt
