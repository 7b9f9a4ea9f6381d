"""The runner gives a large decoder state's memory back: its steps shrink onnxruntime's arena, and
the C heap is trimmed once the search drops it; a small state does neither, and both search alike."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from engine import runner as runner_module
from engine.beam_search import SearchOptions, search
from engine.bundle import load_bundle
from engine.heap import release_memory
from engine.runner import DecoderShape, HostDecoder, Runner, RunnerConfig, pad_batch


@pytest.fixture(scope="module")
def runner(tiny_bundle: Path) -> Runner:
    bundle = load_bundle(tiny_bundle)
    d = bundle.manifest.dimensions
    shape = DecoderShape(d.decoder_layers, d.heads, d.d_head, d.vocab_size)
    return Runner(*bundle.graph_paths("fp32"), shape, RunnerConfig(provider="cpu", threads=1, pool=False))


def decode(runner: Runner) -> tuple[list, bool]:
    """Hypotheses of a beam search over three sentences, and whether the state was large."""
    encoded = runner.encode(pad_batch([[10, 11, 12, 13, 3], [20, 3], [30, 31, 32, 3]], 0))
    state = HostDecoder(runner.decoder, encoded, runner.shape, alignments=True)
    options = SearchOptions(beam_size=3, num_hypotheses=3, return_alignments=True)
    found = search(state, [9, 2, 7], options, bos_id=2, eos_id=3)
    return found, state.large


def test_a_large_state_searches_alike_and_gives_its_memory_back(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    released: list[None] = []
    monkeypatch.setattr(runner_module, "release_memory", lambda: released.append(None))
    small, was_large = decode(runner)
    gc.collect()
    assert not was_large and not released
    monkeypatch.setattr(runner_module, "LARGE_CACHE_POSITIONS", 9)  # 9 rows by 1 position: from the second step
    large, was_large = decode(runner)
    gc.collect()
    assert was_large and len(released) == 1, "trimmed once, when the search dropped the state"
    for a, b in zip(small, large, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x.attention, y.attention)


def test_releasing_memory_is_safe_to_call_anywhere() -> None:
    release_memory()  # glibc's malloc_trim here; nothing on a C library without it
