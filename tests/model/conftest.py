"""A synthetic parallel corpus in the Multi30K file layout, small enough to train on in seconds."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

EN = [
    "a",
    "the",
    "man",
    "woman",
    "dog",
    "cat",
    "red",
    "blue",
    "runs",
    "sits",
    "on",
    "under",
    "big",
    "small",
    "house",
    "street",
    "ball",
    "child",
]
DE = [
    "ein",
    "der",
    "mann",
    "frau",
    "hund",
    "katze",
    "rot",
    "blau",
    "rennt",
    "sitzt",
    "auf",
    "unter",
    "gross",
    "klein",
    "haus",
    "strasse",
    "ball",
    "kind",
]
LEXICON = dict(zip(EN, DE, strict=True))


def write_corpus(root: Path, *, train: int = 400, seed: int = 0) -> Path:
    rng = random.Random(seed)
    for split, n in (("train", train), ("val", 40), ("test_2016_flickr", 40)):
        src = [" ".join(rng.choice(list(LEXICON)) for _ in range(rng.randint(2, 7))) for _ in range(n)]
        (root / f"{split}.en").write_text("".join(s.capitalize() + ".\n" for s in src))
        (root / f"{split}.de").write_text(
            "".join(" ".join(LEXICON[w] for w in s.split()).capitalize() + ".\n" for s in src)
        )
    return root


@pytest.fixture(scope="session")
def toy_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("toy_corpus"))


@pytest.fixture(scope="session")
def tiny_train_config(tmp_path_factory: pytest.TempPathFactory, toy_corpus: Path) -> Path:
    path = tmp_path_factory.mktemp("config") / "tiny.toml"
    path.write_text(
        f'data_dir = "{toy_corpus}"\n'
        "vocab_size = 64\nmax_tokens = 512\nlr = 3e-3\nwarmup_steps = 10\nvalidate_every = 4\n"
        "val_bleu_sentences = 8\nkeep_last = 3\naverage_last = 2\nlog_every = 1\nthreads = 1\nprogress = false\n"
        "[model]\nd_model = 32\nn_heads = 2\nd_ff = 64\nn_encoder_layers = 1\nn_decoder_layers = 1\ndropout = 0.1\n"
    )
    return path
