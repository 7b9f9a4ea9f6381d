"""The engine in a child process: same results as in-process, load errors surface in the parent,
and a killed child costs one batch, not the engine."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from engine.api import TranslationOptions
from engine.bundle import BundleError
from engine.translator import Translator, TranslatorConfig
from service.engine_process import EngineCrashed, EngineProcess

TEXTS = ["a b c. d e", "f g h", "i j k l m n o"]


@pytest.fixture(scope="module")
def config(tiny_bundle: Path) -> TranslatorConfig:
    return TranslatorConfig(model_dir=tiny_bundle, provider="cpu", threads=1)


@pytest.fixture(scope="module")
def engine(config: TranslatorConfig) -> EngineProcess:
    engine = EngineProcess(config, nice=3)
    yield engine
    engine.close()


def test_results_and_stats_equal_the_in_process_translator(engine: EngineProcess, config: TranslatorConfig) -> None:
    options = TranslationOptions(beam_size=3, num_hypotheses=2, return_alignments=True)
    local = Translator(config)
    translated = engine.translate_batch(TEXTS, options)
    assert translated.results == local.translate_batch(TEXTS, options).results
    assert engine.info == local.info
    assert translated.stats.sub_batches and translated.stats.decode_seconds > 0
    assert [engine.count_tokens(t) for t in TEXTS] == [local.count_tokens(t) for t in TEXTS]


def test_the_engine_runs_at_a_lower_priority(engine: EngineProcess) -> None:
    assert os.getpriority(os.PRIO_PROCESS, engine.pid) == os.getpriority(os.PRIO_PROCESS, 0) + 3


def test_a_killed_engine_fails_one_batch_and_is_replaced(engine: EngineProcess) -> None:
    expected = engine.translate_batch(TEXTS).results
    first = engine.pid
    os.kill(first, signal.SIGKILL)
    with pytest.raises(EngineCrashed, match="exit code -9"):
        engine.translate_batch(TEXTS)
    assert engine.pid != first
    assert os.getpriority(os.PRIO_PROCESS, engine.pid) == os.getpriority(os.PRIO_PROCESS, 0) + 3
    assert engine.translate_batch(TEXTS).results == expected


def test_a_failing_batch_raises_in_the_parent_and_the_engine_lives_on(engine: EngineProcess) -> None:
    with pytest.raises(AttributeError):
        engine.translate_batch(TEXTS, "not options")  # type: ignore[arg-type]
    assert engine.translate_batch(TEXTS).results


def test_load_errors_are_raised_by_the_constructor(tiny_bundle: Path, tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="does not exist"):
        EngineProcess(TranslatorConfig(model_dir=tmp_path / "nothing"))
    with pytest.raises(BundleError, match="no variant 'fp16'"):
        EngineProcess(TranslatorConfig(model_dir=tiny_bundle, variant="fp16"))


def test_with_two_streams_two_children_take_batches_at_once(config: TranslatorConfig) -> None:
    streamed = EngineProcess(replace(config, threads=2, streams=2))
    try:
        pids = [child.pid for child in streamed._children]
        assert len(set(pids)) == 2
        assert all((c.config.streams, c.config.threads) == (1, 1) for c in streamed._children), (
            "1 stream, 1 thread each"
        )
        local = Translator(config)
        expected = [local.translate_batch([text]).results for text in TEXTS]
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda text: streamed.translate_batch([text]).results, TEXTS * 4))
        assert results == expected * 4
        os.kill(pids[1], signal.SIGKILL)  # one child dies: its batch fails, the other keeps serving
        outcomes = []
        for _ in range(2):
            try:
                outcomes.append(streamed.translate_batch(TEXTS).results)
            except EngineCrashed:
                outcomes.append(None)
        assert (
            outcomes.count(None) <= 1
            and streamed.translate_batch(TEXTS).results == local.translate_batch(TEXTS).results
        )
    finally:
        streamed.close()
