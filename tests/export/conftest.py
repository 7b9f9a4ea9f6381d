"""The tiny model and its ONNX graphs, loaded once per test module; tiny Hugging Face checkpoints
(MarianMT with one or two vocabularies, M2M100 with NLLB's tokenizer), built once per session.

The Hugging Face checkpoints are random (``export.tiny_hf``), with tokenizers trained on Multi30K
where this checkout has it (real text: rare pieces, accents), else on the synthetic corpus; tests
that use them skip without transformers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
from repo_root import REPO

from engine.bundle import load_bundle
from engine.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from export.parity import OnnxGreedy, one_torch_thread
from model.checkpoint import load_checkpoint, model_from_checkpoint
from model.transformer import Transformer

MULTI30K = REPO.parent / "shared" / "data" / "multi30k"


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


@pytest.fixture(scope="session")
def hf_corpus(tiny_corpus: Path) -> Path:
    """Training text for the tiny Hugging Face checkpoints' tokenizers (``train.{en,de,...}``)."""
    return MULTI30K if (MULTI30K / "train.en").is_file() and (MULTI30K / "train.de").is_file() else tiny_corpus


@contextmanager
def _tiny_hf() -> Iterator[ModuleType]:
    """``export.tiny_hf`` (skip without transformers), torch on one thread while it builds."""
    pytest.importorskip("transformers")
    from export import tiny_hf

    with one_torch_thread():
        yield tiny_hf


@pytest.fixture(scope="session")
def tiny_marian(tmp_path_factory: pytest.TempPathFactory, hf_corpus: Path) -> Path:
    """A MarianMT checkpoint directory, en -> de, one joint vocabulary."""
    with _tiny_hf() as tiny_hf:
        return tiny_hf.build_marian(tmp_path_factory.mktemp("hf") / "opus-mt-en-de", hf_corpus)


@pytest.fixture(scope="session")
def tiny_marian_separate(tmp_path_factory: pytest.TempPathFactory, hf_corpus: Path) -> Path:
    """A MarianMT checkpoint directory, en -> de, a vocabulary per side."""
    with _tiny_hf() as tiny_hf:
        out = tmp_path_factory.mktemp("hf") / "opus-mt-en-de-separate"
        return tiny_hf.build_marian(out, hf_corpus, separate_vocabs=True)


@pytest.fixture(scope="session")
def tiny_nllb(tmp_path_factory: pytest.TempPathFactory, hf_corpus: Path) -> Path:
    """An M2M100 checkpoint directory with NLLB's tokenizer, trained on the corpus' languages among
    English, German, French and Czech."""
    with _tiny_hf() as tiny_hf:
        suffixes = tiny_hf.NLLB_LANGUAGES.items()
        languages = {code: suffix for code, suffix in suffixes if (hf_corpus / f"train.{suffix}").is_file()}
        return tiny_hf.build_nllb(tmp_path_factory.mktemp("hf") / "nllb-tiny", hf_corpus, languages=languages)


@pytest.fixture(scope="session")
def tiny_marian_multi(tmp_path_factory: pytest.TempPathFactory, hf_corpus: Path) -> Path:
    """A multilingual MarianMT checkpoint directory, en -> de or fr, its targets named by a token
    before the source text (``>>fra<<``)."""
    with _tiny_hf() as tiny_hf:
        out = tmp_path_factory.mktemp("hf") / "opus-mt-en-ROMANCE"
        return tiny_hf.build_marian(out, hf_corpus, target_codes=("deu", "fra"))
