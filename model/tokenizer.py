"""The joint sentencepiece vocabulary shared by source and target, and the text normalisation that
training and serving must apply identically.

This module must not import torch: the service tokenizes with it.
"""

from __future__ import annotations

import hashlib
import io
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def normalize_text(text: str) -> str:
    """NFKC, control characters to spaces, whitespace runs collapsed.

    sentencepiece applies NFKC too, but control characters (including tabs and line breaks) would
    otherwise become unknown pieces; the service splits lines before it gets here.
    """
    text = unicodedata.normalize("NFKC", text)
    if not text.isprintable():  # printable text has none of these categories: skip the loop per character
        text = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text)
    return " ".join(text.split())


def train_sentencepiece(
    texts: Iterable[str], model_path: Path, *, vocab_size: int, character_coverage: float = 1.0
) -> Path:
    """Train a unigram model on ``texts`` and write it to ``model_path`` (``.model`` file)."""
    model_path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=(normalize_text(t) for t in texts),
        model_writer=buffer,
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=character_coverage,
        hard_vocab_limit=False,  # tiny corpora get a smaller vocabulary instead of an error
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        # Deterministic and quiet: same text in, same vocabulary out.
        input_sentence_size=0,
        shuffle_input_sentence=False,
        num_threads=1,
        minloglevel=2,
    )
    model_path.write_bytes(buffer.getvalue())
    return model_path


class Tokenizer:
    """Encode text to ids (ending in EOS) and decode ids back to detokenized text."""

    def __init__(self, model_path: str | Path) -> None:
        self.model_path = Path(model_path)
        self.sp = spm.SentencePieceProcessor(model_file=str(self.model_path))
        if (self.sp.pad_id(), self.sp.bos_id(), self.sp.eos_id()) != (PAD_ID, BOS_ID, EOS_ID):
            raise ValueError(f"{self.model_path}: special ids differ from pad={PAD_ID} bos={BOS_ID} eos={EOS_ID}")

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def sha256(self) -> str:
        return hashlib.sha256(self.model_path.read_bytes()).hexdigest()

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(normalize_text(text)) + [EOS_ID]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [ids + [EOS_ID] for ids in self.sp.encode([normalize_text(t) for t in texts])]

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.sp.id_to_piece(i) for i in ids]

    def decode(self, ids: Sequence[int]) -> str:
        return self.sp.decode([i for i in ids if i not in (PAD_ID, BOS_ID, EOS_ID)])
