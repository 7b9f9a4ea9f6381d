"""A runner that meters what the engine asks of it, standing in for a translator's runner: how
much work (decoder steps and rows, source tokens with and without padding) and how long each part
took (encoder, decoder graph, cache reordering). The composition and profile benchmarks read it."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import numpy as np

from engine.decoder import Step
from engine.runner import DeviceDecoder, Encoded, HostDecoder, Runner

T = TypeVar("T")


@dataclass
class Meter:
    steps: int = 0
    rows: int = 0  # one row: one beam of one sentence at one decoder step
    source_tokens: int = 0
    padded_source_tokens: int = 0
    seconds: dict[str, float] = field(default_factory=lambda: collections.defaultdict(float))  # by part

    def add(self, other: Meter) -> None:
        for f in fields(self):
            if f.name != "seconds":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        for part, seconds in other.seconds.items():
            self.seconds[part] += seconds

    def timed(self, part: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self.seconds[part] += time.perf_counter() - start


class MeteredRunner:
    """A ``Runner`` whose encoder runs and decoder states report to ``meter``."""

    def __init__(self, runner: Runner, pad_id: int) -> None:
        self.runner, self.pad_id = runner, pad_id
        self.meter = Meter()

    def encode(self, src_ids: np.ndarray) -> Encoded:
        self.meter.padded_source_tokens += src_ids.size
        self.meter.source_tokens += int((src_ids != self.pad_id).sum())
        return self.meter.timed("encoder", self.runner.encode, src_ids)

    def start(self, encoded: Encoded, *, alignments: bool, vocab_ids: np.ndarray | None = None) -> MeteredDecoder:
        return MeteredDecoder(self.runner.start(encoded, alignments=alignments, vocab_ids=vocab_ids), self.meter)


class MeteredDecoder:
    """Implements ``engine.decoder.Decoder`` around a real decoder state."""

    def __init__(self, decoder: HostDecoder | DeviceDecoder, meter: Meter) -> None:
        self.decoder, self.meter = decoder, meter

    def step(self, tokens: np.ndarray, candidates: int, *, full: bool = True) -> Step:
        self.meter.steps += 1
        self.meter.rows += len(tokens)
        return self.meter.timed("decoder graph", self.decoder.step, tokens, candidates, full=full)

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        self.meter.timed("cache reordering", self.decoder.select, rows, sentences)
