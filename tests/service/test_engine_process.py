"""Engines in child processes: same results as in-process, several models per process, load errors
surface in the parent, a killed child costs no batch, and a cancelled batch stops."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.api import TranslationOptions
from engine.bundle import BundleError
from engine.scheduler import Cancellation, Cancelled
from engine.translator import Translator, TranslatorConfig
from service.engine_process import EngineHost, HostedEngine
from tests.conftest import relabelled_bundle

TEXTS = ["a b c. d e", "f g h", "i j k l m n o"]


@pytest.fixture(scope="module")
def config(tiny_bundle: Path) -> TranslatorConfig:
    return TranslatorConfig(model_dir=tiny_bundle, provider="cpu", threads=1)


@pytest.fixture(scope="module")
def host() -> Iterator[EngineHost]:
    host = EngineHost(threads=1, nice=3)
    yield host
    host.close()


@pytest.fixture(scope="module")
def engine(host: EngineHost, config: TranslatorConfig) -> HostedEngine:
    return host.load(config)


def test_results_and_stats_equal_the_in_process_translator(engine: HostedEngine, config: TranslatorConfig) -> None:
    options = TranslationOptions(beam_size=3, num_hypotheses=2, return_alignments=True)
    local = Translator(config)
    translated = engine.translate_batch(TEXTS, options)
    assert translated.results == local.translate_batch(TEXTS, options).results
    assert engine.info == local.info
    assert translated.stats.sub_batches and translated.stats.decode_seconds > 0
    assert [engine.count_tokens(t) for t in TEXTS] == [local.count_tokens(t) for t in TEXTS]


def test_the_engine_runs_at_a_lower_priority(host: EngineHost) -> None:
    assert os.getpriority(os.PRIO_PROCESS, host.pids[0]) == os.getpriority(os.PRIO_PROCESS, 0) + 3


def test_one_process_hosts_several_models_and_unloads_them(
    host: EngineHost, engine: HostedEngine, tiny_bundle: Path, tmp_path: Path, config: TranslatorConfig
) -> None:
    other = relabelled_bundle(tiny_bundle, tmp_path / "de-en", "other", ["de"], ["en"])
    second = host.load(TranslatorConfig(model_dir=other, provider="cpu"))
    assert second.info.name == "other" and len(host.pids) == 1
    assert second.translate_batch(TEXTS).results == engine.translate_batch(TEXTS).results  # the same weights
    grown = host.resident_bytes()
    second.close()
    with pytest.raises(KeyError):
        second.translate_batch(TEXTS)
    assert engine.translate_batch(TEXTS).results  # the first model is still there
    assert host.resident_bytes() > 0 and grown > 0


def wait_for_new_pid(host: EngineHost, old: int) -> int:
    deadline = time.monotonic() + 60
    while host.pids[0] in (old, None) and time.monotonic() < deadline:
        time.sleep(0.05)
    return host.pids[0]


def test_a_killed_idle_engine_is_replaced_at_once_with_its_models(host: EngineHost, engine: HostedEngine) -> None:
    expected = engine.translate_batch(TEXTS).results
    [first] = host.pids
    os.kill(first, signal.SIGKILL)
    assert wait_for_new_pid(host, first) != first, "replaced without a batch having to fail first"
    assert engine.translate_batch(TEXTS).results == expected
    assert os.getpriority(os.PRIO_PROCESS, host.pids[0]) == os.getpriority(os.PRIO_PROCESS, 0) + 3


def test_a_batch_whose_engine_dies_under_it_is_tried_once_more(host: EngineHost, engine: HostedEngine) -> None:
    texts = [" ".join(TEXTS) * 5] * 400  # seconds of work, so that the kill lands inside it
    options = TranslationOptions(beam_size=16, max_length=150, max_consecutive_repeats=0)
    expected = engine.translate_batch(texts, options).results
    [first] = host.pids
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(engine.translate_batch, texts, options)
        time.sleep(0.2)
        assert not running.done(), "the batch must still be running when its engine is killed"
        os.kill(first, signal.SIGKILL)
        assert running.result().results == expected
    assert host.pids[0] != first


def test_a_cancelled_batch_stops_at_its_next_step(host: EngineHost, engine: HostedEngine) -> None:
    """A batch of many seconds, cancelled half a second in: it ends with Cancelled, not results, and the
    engine then serves the next batch."""
    cancellation = Cancellation()
    endless = [" ".join(TEXTS) * 5] * 2_000
    options = TranslationOptions(beam_size=16, max_length=10_000, max_consecutive_repeats=0)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(engine.translate_batch, endless, options, cancellation)
        time.sleep(0.5)
        assert not running.done()
        cancellation.set()
        with pytest.raises(Cancelled):
            running.result(timeout=60)
    assert engine.translate_batch(TEXTS).results


def test_a_failing_batch_raises_in_the_parent_and_the_engine_lives_on(engine: HostedEngine) -> None:
    with pytest.raises(AttributeError):
        engine.translate_batch(TEXTS, "not options")  # type: ignore[arg-type]
    assert engine.translate_batch(TEXTS).results


def test_load_errors_are_raised_by_load_and_leave_the_host_serving(
    host: EngineHost, engine: HostedEngine, tmp_path: Path, tiny_bundle: Path
) -> None:
    with pytest.raises(BundleError, match="does not exist"):
        host.load(TranslatorConfig(model_dir=tmp_path / "nothing"))
    with pytest.raises(BundleError, match="no variant 'int4'"):
        host.load(TranslatorConfig(model_dir=tiny_bundle, variant="int4"))
    assert engine.translate_batch(TEXTS).results


def test_with_two_streams_two_children_take_batches_at_once(config: TranslatorConfig) -> None:
    streamed = EngineHost(streams=2, threads=1)
    try:
        engine = streamed.load(config)
        pids = streamed.pids
        assert len(set(pids)) == 2
        local = Translator(config)
        expected = [local.translate_batch([text]).results for text in TEXTS]
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda text: engine.translate_batch([text]).results, TEXTS * 4))
        assert results == expected * 4
        os.kill(pids[1], signal.SIGKILL)  # one child dies: no batch fails, the other keeps serving
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda text: engine.translate_batch([text]).results, TEXTS * 4))
        assert results == expected * 4
    finally:
        streamed.close()
