"""A Hugging Face checkpoint's tokenizer as bundle files the torch-free engine reads.

The supported tokenizers all split text with sentencepiece and map pieces to ids through a
vocabulary: MarianTokenizer (``source.spm``, ``target.spm``, ``vocab.json``, or one vocabulary per
side), NllbTokenizer and M2M100Tokenizer (``sentencepiece.bpe.model``, with ids shifted and
language codes appended by the tokenizer). The bundle gets the sentencepiece models as they are and
the tokenizer's own piece -> id table (``get_vocab()``), so ids are the tokenizer's by construction;
the tests compare them with transformers on varied text.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine.bundle import SpecialTokens, TokenizerFiles, TokenizerSide
from export import ExportError

# NLLB's "deu_Latn", M2M100's "__de__"
LANGUAGE_CODE = re.compile(r"^(?:[a-z]{3}_[A-Z][a-z]{3}|__[a-z]{2,3}__)$")
# A multilingual OPUS-MT model's target languages, put before the source text: ">>fra<<", ">>zho_Hans<<"
MARIAN_TARGET_CODE = re.compile(r"^>>(\w+)<<$")
SPM_FILES = {
    "MarianTokenizer": ("source.spm", "target.spm"),
    "NllbTokenizer": ("sentencepiece.bpe.model",) * 2,
    "NllbTokenizerFast": ("sentencepiece.bpe.model",) * 2,
    "M2M100Tokenizer": ("sentencepiece.bpe.model",) * 2,
}


@dataclass(frozen=True)
class ConvertedTokenizer:
    files: TokenizerFiles
    special_tokens: SpecialTokens
    language_tokens: dict[str, int]  # the model's language codes and their token ids; {} if none
    # What the codes name: languages of either side (NLLB, M2M100), or target languages only, whose
    # token goes before the source text (multilingual OPUS-MT, the codes without ">>" and "<<").
    target_tokens_in: Literal["output", "source"] = "output"


def convert_tokenizer(directory: Path, out_dir: Path, *, decoder_start_id: int) -> ConvertedTokenizer:
    """Write the tokenizer of the checkpoint in ``directory`` into ``out_dir``."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(directory)
    except (OSError, ValueError, TypeError) as e:
        raise ExportError(f"{directory}: cannot load the tokenizer: {e}") from e
    kind = type(tokenizer).__name__
    if kind not in SPM_FILES:
        raise ExportError(f"{directory}: tokenizer {kind} is not supported; supported: {sorted(SPM_FILES)}")
    source_spm, target_spm = SPM_FILES[kind]
    for name in {source_spm, target_spm}:
        if not (directory / name).is_file():
            raise ExportError(f"{directory}: {name} is missing (the {kind} sentencepiece model)")
        shutil.copyfile(directory / name, out_dir / name)
    source_vocab, target_vocab = _vocabularies(tokenizer)
    files = TokenizerFiles(
        source=TokenizerSide(model=source_spm, vocab=_write(out_dir, "vocab.json", source_vocab)),
        target=TokenizerSide(
            model=target_spm,
            vocab="vocab.json" if target_vocab is source_vocab else _write(out_dir, "target_vocab.json", target_vocab),
        ),
    )
    specials = SpecialTokens(
        pad=tokenizer.pad_token_id, unk=tokenizer.unk_token_id, bos=decoder_start_id, eos=tokenizer.eos_token_id
    )
    if kind == "MarianTokenizer":
        codes = {m[1]: i for piece, i in source_vocab.items() if (m := MARIAN_TARGET_CODE.match(piece))}
        return ConvertedTokenizer(files, specials, codes, target_tokens_in="source")
    languages = {t: source_vocab[t] for t in tokenizer.all_special_tokens if LANGUAGE_CODE.match(t)}
    return ConvertedTokenizer(files, specials, languages)


def _vocabularies(tokenizer: Any) -> tuple[dict[str, int], dict[str, int]]:
    """(source, target) piece -> id tables; the same object when the vocabulary is joint."""
    if getattr(tokenizer, "separate_vocabs", False):
        return dict(tokenizer.encoder), dict(tokenizer.target_encoder)
    vocab = dict(tokenizer.get_vocab())
    return vocab, vocab


def _write(out_dir: Path, name: str, vocab: dict[str, int]) -> str:
    (out_dir / name).write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return name
