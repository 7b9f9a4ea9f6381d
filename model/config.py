"""Training configuration: a TOML file plus ``key=value`` command-line overrides.

Every value is checked when the config is built, before any data is read: a schedule that cannot
work (a cooldown as long as the run, a warm-up that never ends) is an error naming the keys and what
to change, not a run that trains silently at a rate near 0.
"""

from __future__ import annotations

import ast
import math
import re
import tomllib
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from model.transformer import ModelConfig

# sentencepiece's special pieces (pad, unk, bos, eos) come first in every vocabulary.
_SPECIAL_PIECES = 4
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
_AT_LEAST_ONE = (
    "max_len",
    "max_tokens",
    "accum_steps",
    "warmup_steps",
    "max_steps",
    "max_epochs",
    "validate_every",
    "val_bleu_sentences",
    "val_beam_size",
    "keep_last",
    "average_last",
    "log_every",
)
_AT_LEAST_ZERO = ("cooldown_steps", "max_minutes", "threads")


def _key(default: Any, help_text: str) -> Any:
    return field(default=default, metadata={"help": help_text})


@dataclass(frozen=True)
class TrainConfig:
    data_dir: str = _key("../shared/data/multi30k", "corpus directory: {train,val}.{src_lang,tgt_lang}, one per line")
    src_lang: str = _key("en", "source language: the corpus files' suffix")
    tgt_lang: str = _key("de", "target language: the corpus files' suffix")
    out_dir: str = _key("runs/en-de", "run directory (spm.model, train.log, checkpoints/); a run in it resumes")
    vocab_size: int = _key(8000, "pieces in the joint sentencepiece vocabulary, trained on the first run")
    max_len: int = _key(128, "sentences longer than this (in pieces) are left out; at most model.max_positions")
    model: dict[str, Any] = field(default_factory=dict)  # the [model] table: ModelConfig fields but vocab_size
    max_tokens: int = _key(4096, "tokens per batch, padding included")
    accum_steps: int = _key(1, "batches per optimizer update (gradient accumulation)")
    lr: float = _key(1e-3, "peak learning rate, reached after warmup_steps")
    warmup_steps: int = _key(1000, "linear warm-up to lr, then decay as 1/sqrt(step); below max_steps")
    label_smoothing: float = _key(0.1, "in [0, 1)")
    clip_norm: float = _key(1.0, "gradient norm clipping threshold")
    max_steps: int = _key(100_000, "optimizer updates in all; the schedule ends here")
    cooldown_steps: int = _key(
        0, "the last N steps before max_steps anneal the rate linearly to 0; 0 = none; warmup_steps + N <= max_steps"
    )
    max_epochs: int = _key(1000, "stop after this many passes over the data")
    max_minutes: float = _key(0.0, "stop after this long; 0 = no time limit")
    validate_every: int = _key(500, "validation (loss, BLEU) and a checkpoint every N steps, and at the end")
    val_bleu_sentences: int = _key(1014, "validation sentences translated for BLEU")
    val_beam_size: int = _key(1, "beam size of the validation translations")
    keep_last: int = _key(10, "step checkpoints kept")
    average_last: int = _key(5, "averaged.pt is the mean of the last N step checkpoints; at most keep_last")
    log_every: int = _key(100, "log loss, learning rate and tokens/s every N steps")
    seed: int = _key(1, "data order and initialisation")
    device: str = _key("auto", "auto, cpu, cuda or cuda:N; auto = cuda when available")
    threads: int = _key(0, "torch intra-op threads; 0 = torch's default")
    progress: bool = _key(True, "show a progress bar")

    def __post_init__(self) -> None:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        problems = list(_type_problems(TrainConfig, values)) or list(self._problems())
        if problems:
            raise ValueError("; ".join(problems))

    def _problems(self) -> Iterator[str]:
        yield from self._model_problems()
        for name in _AT_LEAST_ONE:
            if getattr(self, name) < 1:
                yield f"{name}={getattr(self, name)} must be at least 1"
        for name in _AT_LEAST_ZERO:
            if not getattr(self, name) >= 0:
                yield f"{name}={getattr(self, name)} must be at least 0"
        if self.vocab_size <= _SPECIAL_PIECES:
            yield f"vocab_size={self.vocab_size} must be more than the {_SPECIAL_PIECES} special pieces"
        if not 0 < self.lr < math.inf:
            yield f"lr={self.lr} must be a positive number"
        if not 0 <= self.label_smoothing < 1:
            yield f"label_smoothing={self.label_smoothing} must be in [0, 1)"
        if not self.clip_norm > 0:
            yield f"clip_norm={self.clip_norm} must be positive: at 0 every gradient is zeroed"
        if not _DEVICE.fullmatch(self.device):
            yield f"device={self.device!r} must be auto, cpu, cuda or cuda:N"
        if self.average_last > self.keep_last:
            yield (
                f"average_last={self.average_last} exceeds keep_last={self.keep_last}: the checkpoints to average "
                "would be deleted; lower average_last or raise keep_last"
            )
        yield from self._schedule_problems()

    def _model_problems(self) -> Iterator[str]:
        known = {f.name for f in fields(ModelConfig)} - {"vocab_size"}
        if unknown := set(self.model) - known:
            yield f"unknown model settings: {sorted(unknown)}"
            return
        if type_problems := list(_type_problems(ModelConfig, self.model, prefix="model.")):
            yield from type_problems
            return
        try:
            model = ModelConfig(vocab_size=self.vocab_size, **self.model)
        except ValueError as e:
            yield f"[model] {e}"
            return
        if self.max_len > model.max_positions:
            yield (
                f"max_len={self.max_len} exceeds model.max_positions={model.max_positions}: the longest sentences "
                "would not fit the position table; lower max_len or raise model.max_positions"
            )

    def _schedule_problems(self) -> Iterator[str]:
        """The rate must reach ``lr`` before the run ends: see ``model.train.learning_rate``."""
        warmup, cooldown, steps = self.warmup_steps, self.cooldown_steps, self.max_steps
        if warmup >= steps:
            yield (
                f"warmup_steps={warmup} is not below max_steps={steps}: the whole run would be warm-up and the rate "
                "would never reach lr; lower warmup_steps or raise max_steps"
            )
        if cooldown >= steps:
            yield (
                f"cooldown_steps={cooldown} is not below max_steps={steps}: the rate would anneal towards 0 from the "
                "first step; lower cooldown_steps (0 = no cooldown) or raise max_steps"
            )
        elif warmup < steps and warmup + cooldown > steps:
            yield (
                f"warmup_steps={warmup} + cooldown_steps={cooldown} exceed max_steps={steps}: the cooldown would "
                f"start at step {steps - cooldown}, before the warm-up ends, and the rate would never reach lr; "
                "make warmup_steps + cooldown_steps at most max_steps"
            )


def _type_problems(cls: type, values: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """A value of the wrong type would fail far from its key (in a comparison, in torch), so name it here."""
    hints = typing.get_type_hints(cls)
    declared = {f.name: f.type for f in fields(cls)}
    for name, value in values.items():
        if not _fits(value, hints[name]):
            yield f"{prefix}{name}={value!r} is not of type {declared[name]}"


def _fits(value: Any, annotation: Any) -> bool:
    """isinstance for the annotations configs use; an int is a float here, a bool is not a number."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return value in typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, member) for member in typing.get_args(annotation))
    if isinstance(value, bool):
        return annotation is bool
    if annotation is float:
        return isinstance(value, int | float)
    return isinstance(value, origin or annotation)


def _override_text(value: Any) -> str:
    """A value as ``key=value`` writes it (``_parse_value`` reads it back)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def config_keys() -> list[tuple[str, str]]:
    """``key=default`` and help of every top-level setting, generated so that ``--help`` cannot drift."""
    return [
        (f"{f.name}={_override_text(f.default)}", f.metadata["help"]) for f in fields(TrainConfig) if f.name != "model"
    ]


def model_keys() -> list[tuple[str, str]]:
    """``model.key=default`` of every setting of the [model] table (``ModelConfig`` but vocab_size)."""
    return [(f"model.{f.name}={_override_text(f.default)}", "") for f in fields(ModelConfig) if f.name != "vocab_size"]


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
