"""Text <-> ids for a bundle: sentencepiece models, and the text normalisation that training and
serving must apply identically (``model.tokenizer`` trains our joint vocabulary with it).

Two layouts, as ``engine.bundle.TokenizerFiles`` records them:

- our own: one joint sentencepiece model whose ids are the model's (pad 0, unk 1, bos 2, eos 3);
- imported (MarianMT, NLLB): a sentencepiece model per side splits text into pieces, and a vocabulary
  maps each piece to the model's id, an unknown piece to unk, exactly as transformers' MarianTokenizer
  does (NLLB's fairseq-shifted ids are such a vocabulary too). Pieces are looked up by their text,
  not by their sentencepiece id: a joint vocabulary holds pieces one side's model does not know.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

from engine.bundle import Bundle, BundleError, SpecialTokens, TokenizerFiles, TokenizerSide

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


# Above any real vocabulary (NLLB's has 256,206 entries); the inverse is a list of this length.
MAX_VOCABULARY_ID = 1 << 24


@dataclass(frozen=True)
class _Vocabulary:
    """An imported model's piece -> id vocabulary and its inverse. One object serves both sides
    when they name the same file: at OPUS-MT's 58,101 pieces each copy is ~11 MB per process."""

    ids: dict[str, int]
    pieces: list[str]  # id -> piece; "" for an id no piece has

    @classmethod
    def load(cls, path: Path) -> _Vocabulary:
        ids = json.loads(path.read_text(encoding="utf-8"))
        if not all(isinstance(i, int) and 0 <= i < MAX_VOCABULARY_ID for i in ids.values()):
            raise BundleError(f"{path}: every id must be an integer in 0..{MAX_VOCABULARY_ID - 1}")
        pieces = [""] * (max(ids.values(), default=-1) + 1)
        for piece, i in ids.items():
            pieces[i] = piece
        return cls(ids, pieces)


class _Side:
    """One side's sentencepiece model and, for imported models, its vocabulary."""

    def __init__(self, model_path: Path, vocabulary: _Vocabulary | None, unk_id: int) -> None:
        self.sp = spm.SentencePieceProcessor(model_file=str(model_path))
        self.vocab = vocabulary.ids if vocabulary is not None else None
        self.by_id = vocabulary.pieces if vocabulary is not None else None
        self.unk_id = unk_id

    @property
    def size(self) -> int:
        return self.sp.get_piece_size() if self.by_id is None else len(self.by_id)

    def encode(self, texts: list[str]) -> list[list[int]]:
        # One text at a time: sentencepiece's list call starts its thread pool on every call, which
        # costs more than encoding a short sentence, and the engine mostly encodes one.
        if self.vocab is None:
            return [self.sp.encode(text) for text in texts]
        vocab, unk = self.vocab, self.unk_id
        return [[vocab.get(p, unk) for p in self.sp.encode(text, out_type=str)] for text in texts]

    def score(self, text: str) -> float:
        """How likely this side's sentencepiece model finds ``text``: the sum of its pieces' scores
        (log-probabilities, in a unigram model); -inf with a piece the model does not know, which
        sentencepiece scores 0."""
        pieces = self.sp.encode(text, out_type=str)
        if self.unk_id in self.ids(pieces):
            return -math.inf
        return sum(self.sp.get_score(self.sp.piece_to_id(p)) for p in pieces)

    def ids(self, pieces: Sequence[str]) -> list[int]:
        if self.vocab is None:
            return [self.sp.piece_to_id(p) for p in pieces]
        return [self.vocab.get(p, self.unk_id) for p in pieces]

    def pieces(self, ids: Sequence[int]) -> list[str]:
        if self.by_id is None:
            return [self.sp.id_to_piece(i) for i in ids]
        by_id, n = self.by_id, len(self.by_id)
        return [by_id[i] if 0 <= i < n else "" for i in ids]

    def decode(self, ids: list[int]) -> str:
        if self.vocab is None:
            return self.sp.decode(ids)
        # A joint vocabulary's pieces from the other side's model are unknown to this one, which
        # leaves their word-start marks in place; transformers turns those into spaces too.
        return self.sp.decode_pieces(self.pieces(ids)).replace("▁", " ").strip()


class Tokenizer:
    """Encode text to ids (prefix, pieces, EOS) and decode ids back to detokenized text."""

    def __init__(self, model_path: str | Path) -> None:
        """Our joint vocabulary: one sentencepiece model with the special ids above."""
        self.model_path = Path(model_path)
        side = _Side(self.model_path, None, UNK_ID)
        if (side.sp.pad_id(), side.sp.bos_id(), side.sp.eos_id()) != (PAD_ID, BOS_ID, EOS_ID):
            raise ValueError(f"{self.model_path}: special ids differ from pad={PAD_ID} bos={BOS_ID} eos={EOS_ID}")
        self._init(side, side, SpecialTokens())

    @classmethod
    def from_bundle(cls, bundle: Bundle) -> Tokenizer:
        m = bundle.manifest
        languages = {t for lang in m.languages.source + m.languages.target for t in lang.tokens}
        return cls.from_files(bundle.path, m.tokenizer, m.special_tokens, language_tokens=languages)

    @classmethod
    def from_files(
        cls, root: Path, files: TokenizerFiles, specials: SpecialTokens, *, language_tokens: Iterable[int] = ()
    ) -> Tokenizer:
        """The tokenizer ``files`` (in directory ``root``) describe; decoding drops ``language_tokens``."""
        if files.source.vocab is None and files.source == files.target and specials == SpecialTokens():
            return cls(root / files.source.model)
        tokenizer = cls.__new__(cls)
        tokenizer.model_path = root / files.source.model
        vocabularies = {
            name: _Vocabulary.load(root / name) for name in {files.source.vocab, files.target.vocab} if name is not None
        }

        def side(files: TokenizerSide) -> _Side:
            vocabulary = vocabularies[files.vocab] if files.vocab is not None else None
            return _Side(root / files.model, vocabulary, specials.unk)

        source = side(files.source)
        target = source if files.target == files.source else side(files.target)
        tokenizer._init(source, target, specials, language_tokens)
        return tokenizer

    def _init(self, source: _Side, target: _Side, specials: SpecialTokens, language_tokens: Iterable[int] = ()) -> None:
        self.source, self.target, self.specials = source, target, specials
        self.sp = source.sp
        # Decoding drops what is not text; an imported model's unk as well, as transformers'
        # skip_special_tokens does, while our own shows it as sentencepiece's " ⁇ ".
        self._skip = {specials.pad, specials.bos, specials.eos, *language_tokens}
        if target.vocab is not None:
            self._skip.add(specials.unk)

    @property
    def vocab_size(self) -> int:
        """Source ids (the joint vocabulary's size for our own models)."""
        return self.source.size

    @property
    def target_vocab_size(self) -> int:
        return self.target.size

    def sha256(self) -> str:
        return hashlib.sha256(self.model_path.read_bytes()).hexdigest()

    def encode(self, text: str, prefix: Sequence[int] = ()) -> list[int]:
        return self.encode_batch([text], prefix)[0]

    def encode_batch(self, texts: Sequence[str], prefix: Sequence[int] = ()) -> list[list[int]]:
        ids = self.source.encode([normalize_text(t) for t in texts])
        return [[*prefix, *row, self.specials.eos] for row in ids]

    def count(self, text: str) -> int:
        """Source pieces of ``text``, without language tokens or EOS."""
        return len(self.source.encode([normalize_text(text)])[0])

    def score(self, text: str) -> float:
        """How likely the source side's sentencepiece model finds ``text`` (``_Side.score``)."""
        return self.source.score(normalize_text(text))

    def encode_target(self, text: str) -> list[int]:
        """Target ids of ``text`` as the model would write it within a sentence: no EOS."""
        return self.target.encode([normalize_text(text)])[0]

    def source_pieces(self, ids: Sequence[int]) -> list[str]:
        return self.source.pieces(ids)

    def target_pieces(self, ids: Sequence[int]) -> list[str]:
        return self.target.pieces(ids)

    def target_ids(self, pieces: Sequence[str]) -> list[int]:
        """The inverse of ``target_pieces``: unknown pieces are unk."""
        return self.target.ids(pieces)

    def decode(self, ids: Sequence[int]) -> str:
        """Target ids -> text, special tokens left out."""
        return self.target.decode([i for i in ids if i not in self._skip])

    def decode_source(self, ids: Sequence[int]) -> str:
        return self.source.decode([i for i in ids if i not in self._skip])
