"""Parallel corpus loading and token-based, length-bucketed batching.

An epoch's batches are a pure function of (seed, epoch), so a run resumes exactly from
(epoch, batch index) and every data-parallel rank can take its own slice without communication.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from engine.tokenizer import BOS_ID, PAD_ID, Tokenizer


class CorpusError(ValueError):
    """A corpus file that cannot be used (missing, not UTF-8 text, misaligned, empty); the message
    names the file and the problem."""


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (a BOM and CRLF endings allowed).

    Lines end at ``\n`` only: ``str.splitlines`` also breaks at U+2028, U+0085, form feeds and other
    separators that web-crawled corpora carry inside sentences, and one such character on one side
    of a parallel corpus would shift every later pair out of alignment.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 text (byte {e.start} is {e.object[e.start : e.start + 1]!r})") from e
    except IsADirectoryError as e:
        raise CorpusError(f"{path}: is a directory, not a file of sentences") from e
    except OSError as e:
        raise CorpusError(f"{path}: cannot read it: {e.strerror or e}") from e
    lines = text.split("\n")
    if lines[-1] == "":  # the final newline ends the last line; it does not start another
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def corpus_paths(data_dir: Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    return data_dir / f"{split}.{src_lang}", data_dir / f"{split}.{tgt_lang}"


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    """The two sides of a parallel corpus, which must have the same number of lines, at least one."""
    src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise CorpusError(f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}")
    if not src_lines:
        raise CorpusError(f"{src_path} and {tgt_path} are empty")
    return src_lines, tgt_lines


@dataclass
class ParallelData:
    """Tokenized sentence pairs, each id list ending in EOS."""

    src: list[list[int]]
    tgt: list[list[int]]

    @classmethod
    def load(cls, src_path: Path, tgt_path: Path, tokenizer: Tokenizer, *, max_len: int) -> ParallelData:
        src_lines, tgt_lines = read_parallel(src_path, tgt_path)
        pairs = [
            (s, t)
            for s, t in zip(tokenizer.encode_batch(src_lines), tokenizer.encode_batch(tgt_lines), strict=True)
            # A side that is only EOS was a blank line: training on it teaches the model to invent
            # a sentence from nothing, or to drop one.
            if 1 < len(s) <= max_len and 1 < len(t) <= max_len - 1  # target gets BOS prepended
        ]
        if not pairs:
            raise CorpusError(
                f"{src_path} and {tgt_path}: no sentence pair is non-blank and at most max_len={max_len} pieces long"
            )
        return cls([s for s, _ in pairs], [t for _, t in pairs])

    def __len__(self) -> int:
        return len(self.src)

    def num_tokens(self) -> int:
        return sum(len(s) + len(t) for s, t in zip(self.src, self.tgt, strict=True))


def make_batches(
    data: ParallelData, *, max_tokens: int, seed: int, epoch: int, bucket_size: int = 100
) -> list[list[int]]:
    """Index batches whose padded size (sentences x longest side) stays within ``max_tokens``.

    Sentences are shuffled, sorted by length inside windows of ``bucket_size`` batches' worth of
    data (so padding is small but order still varies), cut into batches, and the batches shuffled.
    """
    rng = random.Random(seed * 100_003 + epoch)
    order = list(range(len(data)))
    rng.shuffle(order)

    def size(i: int) -> int:
        return max(len(data.src[i]), len(data.tgt[i]) + 1)

    window = max(1, bucket_size * max_tokens // 20)
    batches: list[list[int]] = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=size)
        batch: list[int] = []
        longest = 0
        for i in chunk:
            if batch and max(longest, size(i)) * (len(batch) + 1) > max_tokens:
                batches.append(batch)
                batch, longest = [], 0
            batch.append(i)
            longest = max(longest, size(i))
        if batch:
            batches.append(batch)
    rng.shuffle(batches)
    return batches


def pad(seqs: list[list[int]]) -> Tensor:
    out = torch.full((len(seqs), max(len(s) for s in seqs)), PAD_ID, dtype=torch.long)
    for row, s in enumerate(seqs):
        out[row, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def collate(data: ParallelData, batch: list[int]) -> tuple[Tensor, Tensor, Tensor]:
    """-> src (B, S), decoder input (B, T) = BOS + target, decoder output (B, T) = target + EOS."""
    src = pad([data.src[i] for i in batch])
    tgt_in = pad([[BOS_ID] + data.tgt[i][:-1] for i in batch])
    tgt_out = pad([data.tgt[i] for i in batch])
    return src, tgt_in, tgt_out
