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


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def corpus_paths(data_dir: Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    return data_dir / f"{split}.{src_lang}", data_dir / f"{split}.{tgt_lang}"


@dataclass
class ParallelData:
    """Tokenized sentence pairs, each id list ending in EOS."""

    src: list[list[int]]
    tgt: list[list[int]]

    @classmethod
    def load(cls, src_path: Path, tgt_path: Path, tokenizer: Tokenizer, *, max_len: int) -> ParallelData:
        src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
        if len(src_lines) != len(tgt_lines):
            raise ValueError(f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}")
        pairs = [
            (s, t)
            for s, t in zip(tokenizer.encode_batch(src_lines), tokenizer.encode_batch(tgt_lines), strict=True)
            if len(s) <= max_len and len(t) <= max_len - 1  # target gets BOS prepended
        ]
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
