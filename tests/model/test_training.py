"""The offline pipeline end to end on a synthetic corpus: train, resume, torchrun, evaluate."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from repo_root import REPO, python_env

from engine.tokenizer import Tokenizer
from model.checkpoint import load_checkpoint
from model.config import load_config
from model.data import ParallelData, make_batches
from model.train import learning_rate, main

STEP_LINE = re.compile(r"step (\d+) epoch \d+ loss ([\d.]+)")


def step_losses(out_dir: Path) -> dict[int, str]:
    return {int(m[1]): m[2] for m in STEP_LINE.finditer((out_dir / "train.log").read_text())}


def test_resume_reproduces_the_uninterrupted_run(tiny_train_config: Path, tmp_path: Path) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    main(["--config", str(tiny_train_config), f"out_dir={straight}", "max_steps=8"])
    main(["--config", str(tiny_train_config), f"out_dir={resumed}", "max_steps=4"])  # "interrupted" at step 4
    main(["--config", str(tiny_train_config), f"out_dir={resumed}", "max_steps=8"])
    expected, got = step_losses(straight), step_losses(resumed)
    assert sorted(expected) == list(range(1, 9))
    assert [got[s] for s in range(5, 9)] == [expected[s] for s in range(5, 9)]
    assert "resumed from" in (resumed / "train.log").read_text()
    for name in ("best.pt", "last.pt", "averaged.pt"):
        assert (straight / "checkpoints" / name).exists()
    state = load_checkpoint(straight / "checkpoints" / "averaged.pt")
    assert state["spm_model"] == (straight / "spm.model").read_bytes()
    assert state["train_config"]["max_steps"] == 8


def test_batches_respect_the_token_budget_and_cover_every_pair_once(tiny_corpus: Path, tmp_path: Path) -> None:
    from model.tokenizer import train_sentencepiece

    lines = (tiny_corpus / "train.en").read_text().splitlines() + (tiny_corpus / "train.de").read_text().splitlines()
    tokenizer = Tokenizer(train_sentencepiece(lines, tmp_path / "spm.model", vocab_size=64))
    data = ParallelData.load(tiny_corpus / "train.en", tiny_corpus / "train.de", tokenizer, max_len=64)
    batches = make_batches(data, max_tokens=128, seed=3, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(len(data)))
    for batch in batches:
        longest = max(max(len(data.src[i]), len(data.tgt[i]) + 1) for i in batch)
        assert len(batch) == 1 or longest * len(batch) <= 128
    assert batches == make_batches(data, max_tokens=128, seed=3, epoch=0)
    assert batches != make_batches(data, max_tokens=128, seed=3, epoch=1)


def test_learning_rate_warms_up_then_decays_as_inverse_sqrt(tiny_train_config: Path) -> None:
    cfg = load_config(tiny_train_config, ["lr=1.0", "warmup_steps=100"])
    assert learning_rate(50, cfg) == pytest.approx(0.5)
    assert learning_rate(100, cfg) == pytest.approx(1.0)
    assert learning_rate(400, cfg) == pytest.approx(0.5)


def test_cooldown_anneals_the_rate_linearly_to_zero_at_max_steps(tiny_train_config: Path) -> None:
    cfg = load_config(tiny_train_config, ["lr=1.0", "warmup_steps=100", "max_steps=800", "cooldown_steps=400"])
    assert learning_rate(400, cfg) == pytest.approx(0.5)
    assert learning_rate(600, cfg) == pytest.approx(math.sqrt(100 / 600) * 0.5)
    assert learning_rate(800, cfg) == 0.0


def test_config_rejects_unknown_settings(tiny_train_config: Path) -> None:
    with pytest.raises(ValueError, match="unknown settings"):
        load_config(tiny_train_config, ["learning_rat=1"])
    with pytest.raises(ValueError, match="unknown model settings"):
        load_config(tiny_train_config, ["model.d_modle=64"])


def test_torchrun_with_two_cpu_processes(tiny_train_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "model.train"]
    cmd += ["--config", str(tiny_train_config), f"out_dir={out}", "max_steps=3", "validate_every=3", "device=cpu"]
    env = python_env() | {"OMP_NUM_THREADS": "1"}
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(step_losses(out)) == [1, 2, 3]
    assert load_checkpoint(out / "checkpoints" / "last.pt")["step"] == 3


def test_evaluate_prints_bleu_and_chrf_with_signatures(
    tiny_train_config: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    main(["--config", str(tiny_train_config), f"out_dir={out}", "max_steps=4"])
    cmd = [sys.executable, "-m", "model.evaluate", "--checkpoint", str(out / "checkpoints" / "averaged.pt")]
    cmd += ["--src", str(tiny_corpus / "test_2016_flickr.en"), "--ref", str(tiny_corpus / "test_2016_flickr.de")]
    cmd += ["--beam-size", "3", "--json", "--out", str(tmp_path / "hyps.txt")]
    result = subprocess.run(cmd, cwd=REPO, env=python_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    scores = json.loads(result.stdout)
    assert 0.0 <= scores["bleu"] <= 100.0 and 0.0 <= scores["chrf"] <= 100.0
    assert "nrefs:1" in scores["bleu_signature"] and "case:mixed" in scores["bleu_signature"]
    sources = (tiny_corpus / "test_2016_flickr.en").read_text().splitlines()
    assert len((tmp_path / "hyps.txt").read_text().splitlines()) == len(sources)


def test_training_on_gpu_when_available(tiny_train_config: Path, tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine: the CUDA training path runs only with a GPU")
    main(["--config", str(tiny_train_config), f"out_dir={tmp_path}", "max_steps=2", "device=cuda"])
    assert sorted(step_losses(tmp_path)) == [1, 2]
