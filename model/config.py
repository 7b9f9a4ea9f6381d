"""Training configuration: a TOML file plus ``key=value`` command-line overrides."""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from model.transformer import ModelConfig


@dataclass(frozen=True)
class TrainConfig:
    data_dir: str = "../shared/data/multi30k"
    src_lang: str = "en"
    tgt_lang: str = "de"
    out_dir: str = "runs/en-de"
    vocab_size: int = 8000
    max_len: int = 128  # sentences longer than this (in pieces) are left out of training
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig fields except vocab_size
    max_tokens: int = 4096  # per batch, padding included
    accum_steps: int = 1
    lr: float = 1e-3
    warmup_steps: int = 1000
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    max_steps: int = 100_000
    cooldown_steps: int = 0  # the last N steps before max_steps anneal the rate linearly to 0
    max_epochs: int = 1000
    max_minutes: float = 0.0  # 0 = no time limit
    validate_every: int = 500
    val_bleu_sentences: int = 1014
    val_beam_size: int = 1
    keep_last: int = 10
    average_last: int = 5
    log_every: int = 100
    seed: int = 1
    device: str = "auto"  # auto | cpu | cuda
    threads: int = 0  # torch intra-op threads, 0 = torch's default
    progress: bool = True

    def __post_init__(self) -> None:
        unknown = set(self.model) - {f.name for f in fields(ModelConfig)} | ({"vocab_size"} & set(self.model))
        if unknown:
            raise ValueError(f"unknown model settings: {sorted(unknown)}")
        if self.average_last > self.keep_last:
            raise ValueError("average_last cannot exceed keep_last: the checkpoints would be gone")


def _parse_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def load_config(path: Path, overrides: list[str]) -> TrainConfig:
    raw = tomllib.loads(path.read_text())
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"override {item!r} is not key=value")
        target = raw
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = _parse_value(value)
    known = {f.name for f in fields(TrainConfig)}
    if unknown := set(raw) - known:
        raise ValueError(f"unknown settings in {path}: {sorted(unknown)}")
    return TrainConfig(**raw)
