"""Engine processes share a model's weights (engine.shared_weights): measured in /proc, two
processes loading one graph through the cache hold one copy of its weights, which without the cache
each holds a private copy of; translations are the same either way."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import shared_weights
from engine.runner import RunnerConfig, load_session, session_options
from engine.translator import Translator, TranslatorConfig
from service.engine_process import EngineHost

ROWS, COLUMNS = 1024, 4096  # a 16 MB weight: far above the noise of a process's heap
WEIGHT_MB = ROWS * COLUMNS * 4 / 2**20
MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")  # the first line of a mapping in /proc/PID/smaps
INPUT = np.linspace(-1, 1, 8 * ROWS, dtype=np.float32).reshape(8, ROWS)


@pytest.fixture(scope="module")
def matmul_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x (N, ROWS) @ W: a constant operand that MLAS prepacks at load, embedded in the graph as the
    shipped bundles' weights are."""
    weight = np.random.default_rng(0).standard_normal((ROWS, COLUMNS), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", ROWS])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", COLUMNS])],
        [numpy_helper.from_array(weight, "w")],
    )
    path = tmp_path_factory.mktemp("matmul") / "matmul.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def memory_mb(pid: int | str = "self") -> dict[str, float]:
    """smaps_rollup's fields in MB."""
    lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
    return {name: int(value.split()[0]) / 1024 for name, _, value in (line.partition(":") for line in lines)}


def mapped_mb(directory: Path, pid: int | str = "self") -> dict[str, float]:
    """Resident, shared and proportional MB of a process's mappings of the files under ``directory``."""
    found = {"Rss": 0.0, "Pss": 0.0, "Shared_Clean": 0.0, "Shared_Dirty": 0.0}
    inside = False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if MAPPING.match(line):
            inside = str(directory) in line
        elif inside and (name := line.partition(":")[0]) in found:
            found[name] += int(line.split()[1]) / 1024
    return found


def load_and_hold(graph: str, cache: str | None, conn: Connection) -> None:
    """A child: load the graph as the runner does, run it, report its memory, hold it until told."""
    before = memory_mb()
    config = RunnerConfig(provider="cpu", threads=1, weights_cache=Path(cache) if cache else None)
    session = load_session(Path(graph), "cpu", config)
    output = session.run(None, {"x": INPUT})[0]
    after = memory_mb()
    conn.send((output, after["Anonymous"] - before["Anonymous"], mapped_mb(Path(cache)) if cache else None))
    conn.recv()


def two_processes(graph: Path, cache: Path | None) -> tuple[list[tuple], float]:
    """Each process's report, and the memory both hold together while they hold the graph: their
    anonymous memory and their shares of the cache's pages. Not their whole PSS: their shares of
    the libraries' pages change with how many other processes (other tests') map them too."""
    context = multiprocessing.get_context("spawn")
    children, reports = [], []
    try:
        for _ in range(2):  # one after the other: the second finds the first's copy
            parent, child = context.Pipe()
            process = context.Process(target=load_and_hold, args=(str(graph), cache and str(cache), child))
            process.start()
            children.append((process, parent))
            reports.append(parent.recv())
        held = [memory_mb(p.pid)["Anonymous"] + (mapped_mb(cache, p.pid)["Pss"] if cache else 0) for p, _ in children]
        return reports, sum(held)
    finally:
        for process, parent in children:
            parent.send(None)
            process.join(timeout=30)


def test_two_processes_hold_one_copy_of_the_weights(matmul_graph: Path, tmp_path: Path) -> None:
    (own, own_2), own_held = two_processes(matmul_graph, None)
    # Built here, as the service's first engine process would: building holds a session of its own.
    level = session_options(1, spin=False).graph_optimization_level
    shared_weights.optimized_graph(matmul_graph, None, level, tmp_path / "cache")
    (first, second), shared_held = two_processes(matmul_graph, tmp_path / "cache")
    # Without the cache, each process's private memory grows by the weights (MLAS's packed copy);
    # with it, neither's does: the packed weights are the cache file's pages.
    assert own[1] > 0.9 * WEIGHT_MB and own_2[1] > 0.9 * WEIGHT_MB
    assert first[1] < 0.25 * WEIGHT_MB and second[1] < 0.25 * WEIGHT_MB
    # The second process maps the pages the first one reads: resident once, for both.
    assert second[2]["Rss"] > 0.9 * WEIGHT_MB
    assert second[2]["Shared_Clean"] + second[2]["Shared_Dirty"] > 0.9 * WEIGHT_MB  # dirty: just written
    assert shared_held < own_held - 0.75 * WEIGHT_MB  # one copy for two processes, not two
    for report in (own_2, first, second):
        np.testing.assert_array_equal(report[0], own[0])


def test_the_cache_is_built_once_and_keyed_by_the_graph(matmul_graph: Path, tmp_path: Path) -> None:
    level = session_options(1, spin=False).graph_optimization_level
    path = shared_weights.optimized_graph(matmul_graph, None, level, tmp_path)
    built = path.stat().st_mtime_ns
    assert shared_weights.optimized_graph(matmul_graph, None, level, tmp_path) == path
    assert path.stat().st_mtime_ns == built
    edited = onnx.load(str(matmul_graph))
    edited.graph.node[0].name = "renamed"
    assert shared_weights.optimized_graph(matmul_graph, edited.SerializeToString(), level, tmp_path) != path
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == sorted(
        [path.parent.name, shared_weights.cache_key(matmul_graph, edited.SerializeToString(), level)]
    )


def test_an_unwritable_cache_loads_the_graph_unshared(
    matmul_graph: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="engine.shared_weights"):
        session = load_session(
            matmul_graph, "cpu", RunnerConfig(provider="cpu", threads=1, weights_cache=blocked / "cache")
        )
    assert "weights not shared" in caplog.text
    np.testing.assert_allclose(session.run(None, {"x": INPUT})[0], INPUT @ numpy_helper.to_array(
        onnx.load(str(matmul_graph)).graph.initializer[0]), rtol=1e-4, atol=1e-3)  # fmt: skip


@pytest.mark.parametrize("variant", ["fp32", "int8"])
def test_translations_are_the_same_with_shared_weights(tiny_bundle: Path, tmp_path: Path, variant: str) -> None:
    texts = ["A man runs in the park.", "The red dog plays with a ball under a tree.", "A girl."]
    config = TranslatorConfig(model_dir=tiny_bundle, provider="cpu", threads=1, variant=variant)
    own = Translator(config).translate_batch(texts).results
    shared = Translator(replace(config, weights_cache=tmp_path)).translate_batch(texts).results
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2, "the encoder and the decoder, cached"
    assert [r.text for r in shared] == [r.text for r in own]
    assert [r.hypotheses[0].score for r in shared] == [r.hypotheses[0].score for r in own]


def test_the_service_engine_processes_share_through_the_cache(tiny_bundle: Path, tmp_path: Path) -> None:
    texts = ["A man runs in the park.", "The red dog plays with a ball under a tree."]
    config = TranslatorConfig(model_dir=tiny_bundle, provider="cpu")
    results = []
    for weights_cache in (None, tmp_path):
        host = EngineHost(streams=2, threads=1, weights_cache=weights_cache)
        try:
            results.append(host.load(config).translate_batch(texts).results)
        finally:
            host.close()
    assert results[0] == results[1]
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2, "the encoder and the decoder, cached"


def load_entry(graph: str, cache: str, start: Any, conn: Connection) -> None:
    """A child: load ``graph`` through the cache once ``start`` is set, report the entry, hold it
    until told."""
    start.wait()
    level = session_options(1, spin=False).graph_optimization_level
    try:
        conn.send(shared_weights.optimized_graph(Path(graph), None, level, Path(cache)))
    except Exception as e:  # reported, so that the test fails on it rather than waiting
        conn.send(e)
    conn.recv()


@contextlib.contextmanager
def processes_holding(graphs: list[Path], cache: Path) -> Iterator[list[Path | Exception]]:
    """One process per graph, started together, each loading its graph through ``cache`` and
    holding it while the block runs; what each loaded."""
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    children = []
    try:
        for graph in graphs:
            parent, child = context.Pipe()
            process = context.Process(target=load_entry, args=(str(graph), str(cache), start, child))
            process.start()
            children.append((process, parent))
        start.set()
        yield [parent.recv() for _, parent in children]
    finally:
        for process, parent in children:
            with contextlib.suppress(OSError):
                parent.send(None)
            process.join(timeout=30)


def renamed(graph: Path, name: str, tmp_path: Path) -> Path:
    """``graph`` with a node renamed: the same weights under another cache key."""
    model = onnx.load(str(graph))
    model.graph.node[0].name = name
    path = tmp_path / name / graph.name
    path.parent.mkdir()
    onnx.save_model(model, str(path))
    return path


def test_processes_starting_together_build_an_entry_once_and_all_share_it(matmul_graph: Path, tmp_path: Path) -> None:
    """Each process holds the entry it loaded for as long as it lives; those arriving while it is
    built wait for it rather than give up on sharing."""
    with processes_holding([matmul_graph] * 4, tmp_path) as loaded:
        assert all(isinstance(p, Path) for p in loaded), loaded
        assert len(set(loaded)) == 1
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [loaded[0].parent.name]  # no staging left


def test_entries_unused_for_days_are_deleted_when_another_is_built(matmul_graph: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    old, held, recent = (renamed(matmul_graph, name, tmp_path) for name in ("old", "held", "recent"))
    with processes_holding([old, recent], cache) as loaded:  # loaded by processes since ended
        old_entry, recent_entry = (p.parent for p in loaded)
    stale_staging = cache / f".{old_entry.name}.12345"
    stale_staging.mkdir()
    days_ago = time.time() - (shared_weights.UNUSED_DAYS + 1) * 86400
    with processes_holding([held], cache) as (held_path,):
        for path in (old_entry, held_path.parent, stale_staging):
            os.utime(path, (days_ago, days_ago))
        assert (cache / f"{recent_entry.name}.lock").is_file()
        level = session_options(1, spin=False).graph_optimization_level
        new = shared_weights.optimized_graph(matmul_graph, None, level, cache)  # built: the others are pruned
        assert not old_entry.exists() and not stale_staging.exists()
        assert held_path.is_file(), "a process still has it loaded"
        assert (recent_entry / recent.name).is_file(), "used within the last days"
        assert new.is_file()
    # Unused for days but loaded here, by this process: kept.
    os.utime(new.parent, (days_ago, days_ago))
    assert shared_weights.prune(cache, older_than_s=shared_weights.UNUSED_DAYS * 86400) == [held_path.parent]
    assert new.is_file()


def test_an_entry_that_cannot_be_locked_is_used_as_it_is(matmul_graph: Path, tmp_path: Path) -> None:
    """A cache built elsewhere and mounted read-only. (The tests run as root, whom permissions do not
    stop: a directory in the lock file's place cannot be opened for writing either.)"""
    level = session_options(1, spin=False).graph_optimization_level
    with processes_holding([matmul_graph], tmp_path) as (built,):
        pass
    lock = tmp_path / f"{built.parent.name}.lock"
    lock.unlink()
    lock.mkdir()
    assert shared_weights.optimized_graph(matmul_graph, None, level, tmp_path) == built
    shutil.rmtree(built.parent)
    with pytest.raises(OSError):
        shared_weights.optimized_graph(matmul_graph, None, level, tmp_path)


def test_a_build_that_fails_leaves_the_entry_to_others(
    matmul_graph: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object) -> None:
        raise RuntimeError("onnxruntime could not optimize it")

    level = session_options(1, spin=False).graph_optimization_level
    with monkeypatch.context() as patched:
        patched.setattr(shared_weights, "_build", fail)
        with pytest.raises(RuntimeError):
            shared_weights.optimized_graph(matmul_graph, None, level, tmp_path)
    with processes_holding([matmul_graph], tmp_path) as (loaded,):
        assert isinstance(loaded, Path) and loaded.is_file(), loaded
