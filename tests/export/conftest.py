"""The tiny model and its ONNX graphs, loaded once per test module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.bundle import load_bundle
from engine.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from export.parity import OnnxGreedy, one_torch_thread
from model.checkpoint import load_checkpoint, model_from_checkpoint
from model.transformer import Transformer


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def tiny_model(tiny_checkpoint: Path) -> Transformer:
    return model_from_checkpoint(load_checkpoint(tiny_checkpoint))


@pytest.fixture(scope="module")
def alignment_layer(tiny_bundle: Path) -> int:
    return load_bundle(tiny_bundle, check_graphs=False).manifest.alignment.layer


@pytest.fixture(scope="module")
def tiny_tokenizer(tiny_bundle: Path) -> Tokenizer:
    return Tokenizer.from_bundle(load_bundle(tiny_bundle, check_graphs=False))


def greedy_for(bundle_dir: Path, variant: str) -> OnnxGreedy:
    encoder, decoder = load_bundle(bundle_dir, check_graphs=False).graph_paths(variant)
    return OnnxGreedy(encoder, decoder, eos_id=EOS_ID, pad_id=PAD_ID, bos_id=BOS_ID)


@pytest.fixture(scope="module")
def fp32_greedy(tiny_bundle: Path) -> OnnxGreedy:
    return greedy_for(tiny_bundle, "fp32")
