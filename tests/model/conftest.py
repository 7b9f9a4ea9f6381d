"""A training config for the shared synthetic corpus (``tiny_corpus`` in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_train_config(tmp_path_factory: pytest.TempPathFactory, tiny_corpus: Path) -> Path:
    path = tmp_path_factory.mktemp("config") / "tiny.toml"
    # warmup_steps = 1: the warm-up must end before max_steps, and the tests' runs are as short as 2 steps.
    path.write_text(
        f'data_dir = "{tiny_corpus}"\n'
        "vocab_size = 64\nmax_tokens = 512\nlr = 3e-3\nwarmup_steps = 1\nvalidate_every = 4\n"
        "val_bleu_sentences = 8\nkeep_last = 3\naverage_last = 2\nlog_every = 1\nthreads = 1\nprogress = false\n"
        "[model]\nd_model = 32\nn_heads = 2\nd_ff = 64\nn_encoder_layers = 1\nn_decoder_layers = 1\ndropout = 0.1\n"
    )
    return path
