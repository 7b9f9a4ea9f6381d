"""The joint sentencepiece vocabulary shared by source and target, and the text normalisation that
training and serving must apply identically (``model.tokenizer`` trains the vocabulary with it)."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Sequence
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
