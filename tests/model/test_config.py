"""Training config validation: an impossible or nonsensical setting is refused when the config is
built, naming the keys, their values and what to change; ``python -m model.train`` says so in one
line and exits 2, before any data is read."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from repo_root import REPO, python_env

from model.config import load_config
from model.train import main

SHIPPED = sorted((REPO / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_configs_are_valid(path: Path) -> None:
    cfg = load_config(path, [])
    assert cfg.warmup_steps + cfg.cooldown_steps <= cfg.max_steps


def test_tiny_config_is_valid(tiny_train_config: Path) -> None:
    load_config(tiny_train_config, ["max_steps=2"])


def test_a_short_run_of_a_shipped_config_names_every_schedule_problem() -> None:
    """30 steps of configs/en-de.toml once trained silently at about 1e-7: warm-up over 800 steps,
    cooldown over 2,000."""
    with pytest.raises(ValueError) as error:
        load_config(REPO / "configs" / "en-de.toml", ["max_steps=30"])
    message = str(error.value)
    assert "warmup_steps=800 is not below max_steps=30" in message
    assert "cooldown_steps=2000 is not below max_steps=30" in message
    assert "lower cooldown_steps (0 = no cooldown) or raise max_steps" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        (["max_steps=100", "warmup_steps=100"], "warmup_steps=100 is not below max_steps=100"),
        (["max_steps=100", "cooldown_steps=100"], "cooldown_steps=100 is not below max_steps=100"),
        (
            ["max_steps=100", "warmup_steps=60", "cooldown_steps=50"],
            "warmup_steps=60 + cooldown_steps=50 exceed max_steps=100: the cooldown would start at step 50",
        ),
        (["warmup_steps=0"], "warmup_steps=0 must be at least 1"),
        (["max_steps=0"], "max_steps=0 must be at least 1"),
        (["cooldown_steps=-1"], "cooldown_steps=-1 must be at least 0"),
        (["lr=0"], "lr=0 must be a positive number"),
        (["lr=-0.001"], "lr=-0.001 must be a positive number"),
        (["max_tokens=0"], "max_tokens=0 must be at least 1"),
        (["accum_steps=0"], "accum_steps=0 must be at least 1"),
        (["max_len=0"], "max_len=0 must be at least 1"),
        (["max_epochs=0"], "max_epochs=0 must be at least 1"),
        (["max_minutes=-1"], "max_minutes=-1 must be at least 0"),
        (["validate_every=0"], "validate_every=0 must be at least 1"),
        (["log_every=0"], "log_every=0 must be at least 1"),
        (["val_bleu_sentences=0"], "val_bleu_sentences=0 must be at least 1"),
        (["val_beam_size=0"], "val_beam_size=0 must be at least 1"),
        (["keep_last=0"], "keep_last=0 must be at least 1"),
        (["average_last=0"], "average_last=0 must be at least 1"),
        (["average_last=4"], "average_last=4 exceeds keep_last=3"),
        (["threads=-1"], "threads=-1 must be at least 0"),
        (["vocab_size=4"], "vocab_size=4 must be more than the 4 special pieces"),
        (["label_smoothing=1.0"], "label_smoothing=1.0 must be in [0, 1)"),
        (["label_smoothing=-0.1"], "label_smoothing=-0.1 must be in [0, 1)"),
        (["clip_norm=0"], "clip_norm=0 must be positive"),
        (["device=tpu"], "device='tpu' must be auto, cpu, cuda or cuda:N"),
        (["max_len=300"], "max_len=300 exceeds model.max_positions=256"),
        (["max_len=100", "model.max_positions=64"], "max_len=100 exceeds model.max_positions=64"),
        (["model.n_heads=3"], "[model] d_model=32 is not divisible by n_heads=3"),
        (["model.n_heads=0"], "[model] n_heads=0 must be at least 1"),
        (["model.n_decoder_layers=0"], "[model] n_decoder_layers=0 must be at least 1"),
        (["model.dropout=1.0"], "[model] dropout=1.0 must be in [0, 1)"),
        (["model.attention_dropout=-0.1"], "[model] attention_dropout=-0.1 must be in [0, 1)"),
        (["max_steps=1e3"], "max_steps=1000.0 is not of type int"),
        (["lr=fast"], "lr='fast' is not of type float"),
        (["progress=1"], "progress=1 is not of type bool"),
        (["model.activation=tanh"], "model.activation='tanh' is not of type Literal"),
        (["model.d_model=wide"], "model.d_model='wide' is not of type int"),
    ],
)
def test_nonsense_is_refused_naming_the_key_and_value(
    tiny_train_config: Path, overrides: list[str], problem: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        load_config(tiny_train_config, overrides)


def test_a_schedule_whose_warmup_ends_as_the_cooldown_starts_is_valid(tiny_train_config: Path) -> None:
    load_config(tiny_train_config, ["max_steps=100", "warmup_steps=50", "cooldown_steps=50"])


def test_the_cli_prints_one_error_line_and_exits_2_before_training(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "model.train", "--config", "configs/en-de.toml", "max_steps=30", f"out_dir={out}"]
    env = python_env()
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    usage, error = result.stderr.splitlines()
    assert usage.startswith("usage: python -m model.train ")
    assert error.startswith("python -m model.train: error: warmup_steps=800 is not below max_steps=30")
    assert "cooldown_steps=2000" in error
    assert not out.exists()


def test_a_missing_config_file_is_an_argparse_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--config", str(tmp_path / "missing.toml")])
    assert exit_.value.code == 2
    assert "python -m model.train: error:" in capsys.readouterr().err
