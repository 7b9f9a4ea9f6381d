"""Training the joint sentencepiece vocabulary, with the engine's normalisation and special ids."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from engine.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, normalize_text


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
