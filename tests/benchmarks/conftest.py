"""Fixtures of the benchmark tests: torch on one thread, and every benchmark run once, at tiny size,
by ``benchmarks.run_all``. Timings are never checked: they mean nothing on a busy test machine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def torch_one_thread() -> Iterator[None]:
    """Tiny models gain nothing from threads, and torch threads spinning on a busy 2-core machine
    slow everything down many times over."""
    from export.parity import one_torch_thread

    with one_torch_thread():
        yield


@pytest.fixture(scope="session")
def tiny_results(
    tiny_checkpoint: Path, tiny_bundle: Path, tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The directory ``run_all`` wrote its files to: one that did not exist, as on a fresh checkout."""
    pytest.importorskip("ctranslate2", reason="the bench extra (ctranslate2) is not installed")
    pytest.importorskip("transformers", reason="the import extra (transformers) is not installed")
    from benchmarks import run_all
    from export.parity import one_torch_thread

    root = tmp_path_factory.mktemp("benchmarks")
    results = root / "results" / "tiny"
    src, ref, bundle = str(tiny_corpus / "val.en"), str(tiny_corpus / "val.de"), str(tiny_bundle)
    engine = ["--checkpoint", str(tiny_checkpoint), "--bundle", bundle, "--src", src, "--ref", ref, "--limit", "6",
              "--rounds", "1", "--workdir", str(root / "engine")]  # fmt: skip
    service = ["--bundle", bundle, "--src", src, "--limit", "16", "--streams", "2", "--rounds", "2",
               "--concurrency", "1", "4", "--duration", "1", "--warmup", "0.2",
               "--workdir", str(root / "service")]  # fmt: skip
    composition = ["--bundle", bundle, "--src", src, "--limit", "24", "--batch", "6", "--rounds", "1"]
    profile = ["--bundle", bundle, "--src", src, "--limit", "24", "--variants", "fp32", "--workdir", str(root / "prof")]
    marian = ["--size", "tiny", "--corpus", str(tiny_corpus), "--src", src, "--limit", "6", "--rounds", "1",
              "--workdir", str(root / "marian")]  # fmt: skip
    with one_torch_thread():  # the engine benchmark's PyTorch agreement check runs in this process
        run_all.main(
            ["--results", str(results), "--engine", *engine, "--service", *service, "--composition", *composition]
            + ["--profile", *profile, "--marian", *marian]
        )
    return results
