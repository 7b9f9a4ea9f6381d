"""Checkpoint files: weights + model config + the sentencepiece model they were trained with.

A checkpoint is self-contained: export and evaluation need nothing else. Training checkpoints also
carry the optimizer, schedule, RNG and data position needed to resume exactly.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from model.transformer import ModelConfig, Transformer, build_model


def save_checkpoint(path: Path, model: Transformer, spm_model: bytes, **extra: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "model": model.state_dict(),
        "model_config": model.config.to_dict(),
        "spm_model": spm_model,
        "spm_sha256": hashlib.sha256(spm_model).hexdigest(),
        **extra,
    }
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)  # atomic: an interrupted save never leaves a truncated checkpoint


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint; the message names it and says why."""


def load_checkpoint(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=False)


def read_checkpoint(path: Path) -> dict[str, Any]:
    """``load_checkpoint`` for a path a user gave: a missing, truncated or foreign file is a
    ``CheckpointError`` that says so, not torch's zip or pickle internals."""
    if not path.is_file():
        raise CheckpointError(f"{path}: {'is a directory, not a' if path.is_dir() else 'no such'} checkpoint file")
    try:
        state = load_checkpoint(path)
    except Exception as e:  # torch.load raises many types (zip, pickle, EOF) for a damaged file
        raise CheckpointError(f"{path}: not a readable checkpoint (truncated or another kind of file?): {e}") from e
    if not isinstance(state, dict) or not {"model", "model_config", "spm_model"} <= state.keys():
        raise CheckpointError(f"{path}: not a model checkpoint of this project (no model, model_config, spm_model)")
    return state


def model_from_checkpoint(state: dict[str, Any]) -> Transformer:
    model = build_model(ModelConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    return model.eval()


def write_spm(state: dict[str, Any], path: Path) -> Path:
    path.write_bytes(state["spm_model"])
    return path


def average_checkpoints(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the weights of ``paths`` (Vaswani et al. average the last checkpoints)."""
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        for name, tensor in load_checkpoint(path)["model"].items():
            total[name] = total.get(name, 0) + tensor.double()
    return {name: (t / len(paths)).float() for name, t in total.items()}
