"""One copy of a model's weights per machine, not one per process: graphs loaded from a cache of
onnxruntime's own optimized copy of them, whose weights every process maps from one file.

Where a process's copies come from: onnxruntime parses weights embedded in a graph into its heap;
weights kept as external data it maps from their file (pages of the page cache, shared by every
process mapping them), but at load MLAS packs each MatMul's constant operand into a layout of its
own (prepacking), and the graph optimizations fold and fuse constants into new ones, all in
private memory. Two engine processes (two streams) held two copies of nearly every weight.

``optimized_graph`` has onnxruntime optimize a graph once per machine and save it with every
initializer, the prepacked ones too (``session.save_external_prepacked_constant_initializers``),
in one external data file under the cache directory. A session of that saved graph maps the file
and uses the prepacked weights where they lie: every process holds the same pages, and PSS charges
each its share. The saved graph is loaded without optimizing it again (it is the optimized graph).

The cache key covers what the saved file depends on: the graph (its bytes, and the size and
modification time of each weight file beside it), the optimization level, the onnxruntime version,
and the CPU (prepacked layouts are those of the kernels MLAS picks for its instruction set). An
entry is written into a staging directory and renamed into place, under a lock, so that engine
processes starting together build it once and never read half of it.

Each process holds a shared lock on every entry it has loaded for as long as it lives, and marks
the entry used (its directory's modification time) at each load. When a process builds an entry, it
deletes the entries that no process holds and none has used for ``UNUSED_DAYS``: a model's
earlier versions, and every entry of an earlier onnxruntime, would otherwise stay on disk for ever.

The cache directory is ``RunnerConfig.weights_cache`` (``TranslatorConfig.weights_cache``), which
the service's engine processes set; without it, graphs load as they are (benchmarks/RESULTS.md,
section 18, measures both).
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import onnxruntime as ort

from engine.bundle import sha256_file
from engine.shortlist import EXTERNAL_FOLDER

try:
    import fcntl
except ImportError:  # Windows: no lock; the rename alone keeps an entry whole
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

UNUSED_DAYS = 7
# How long a process waits to build an entry that others hold but that is not there (someone
# deleted it by hand): then it loads the graph unshared.
BUILD_WAIT_S = 30.0
# Each entry this process has loaded: its lock file, open and shared-locked while the process lives.
_held: dict[Path, IO[str]] = {}


def session_model(path: Path, model: str | bytes, options: ort.SessionOptions, directory: Path) -> str | bytes:
    """What a CPU session of ``model`` (the graph file ``path``, or that graph edited, serialized)
    loads: its optimized copy cached in ``directory``, and then ``options`` are set not to optimize
    it again. A cache that cannot be written costs the sharing, not the model: ``model`` itself."""
    try:
        cached = optimized_graph(
            path, model if isinstance(model, bytes) else None, options.graph_optimization_level, directory
        )
    except Exception as e:  # onnxruntime's own exception types, or the file system's
        log.warning("%s: weights not shared, the cache in %s failed: %s", path, directory, e)
        return model
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return str(cached)


def optimized_graph(source: Path, graph: bytes | None, level: ort.GraphOptimizationLevel, directory: Path) -> Path:
    """The cached optimized copy of the graph at ``source`` (or of ``graph``, that graph edited),
    built first if this machine has none."""
    key = cache_key(source, graph, level)
    target = directory / key / source.name
    directory.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # no locks: build if missing, never delete
        if not target.is_file():
            _build(source, graph, level, target)
        return target
    try:
        built = _hold(directory / f"{key}.lock", target, lambda: _build(source, graph, level, target))
        os.utime(target.parent)  # used now
    except OSError:
        if not target.is_file():
            raise
        return target  # a cache this process cannot write to (built elsewhere, mounted read-only): as it is
    if built:
        prune(directory, older_than_s=UNUSED_DAYS * 86400)
    return target


def _hold(lock: Path, target: Path, build: Callable[[], None]) -> bool:
    """Hold ``lock`` shared with ``target`` in place, building it first under the exclusive lock if
    it is missing; whether this call built it."""
    file = _held.get(lock) or _held.setdefault(lock, lock.open("a"))
    deadline = time.monotonic() + BUILD_WAIT_S
    while True:
        fcntl.flock(file, fcntl.LOCK_SH)  # waits while another process builds or deletes it
        if target.is_file():
            return False
        try:  # only one process at a time may hold it to build: none may hold it shared meanwhile
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{target.parent} is missing and other processes hold it") from None
            fcntl.flock(file, fcntl.LOCK_UN)
            time.sleep(random.uniform(0.01, 0.1))  # processes starting together must not retry in step
            continue
        built = not target.is_file()
        if built:
            try:
                build()
            except BaseException:
                fcntl.flock(file, fcntl.LOCK_UN)  # held, it would keep every other process from building it
                raise
        fcntl.flock(file, fcntl.LOCK_SH)
        return built


def prune(directory: Path, *, older_than_s: float) -> list[Path]:
    """Delete the entries under ``directory`` that no process holds and none has used for
    ``older_than_s`` seconds, and staging directories as old (a build killed halfway); what was
    deleted. Their lock files stay: deleting one could let two processes build at once."""
    cutoff = time.time() - older_than_s
    deleted = []
    for staging in directory.glob(".*"):
        if staging.is_dir() and staging.stat().st_mtime < cutoff:
            shutil.rmtree(staging, ignore_errors=True)
            deleted.append(staging)
    for lock in directory.glob("*.lock"):
        entry = lock.with_suffix("")
        if lock in _held or not entry.is_dir() or entry.stat().st_mtime >= cutoff:
            continue
        with lock.open("a") as file:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the file closes
            except BlockingIOError:
                continue  # a process has it loaded
            if entry.is_dir() and entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
                deleted.append(entry)
    if deleted:
        log.info(
            "weights cache %s: deleted %d entries unused for %.0f days", directory, len(deleted), older_than_s / 86400
        )
    return deleted


def cache_key(source: Path, graph: bytes | None, level: ort.GraphOptimizationLevel) -> str:
    digest = hashlib.sha256(graph if graph is not None else sha256_file(source).encode())
    for weights in sorted(source.parent.glob("*.data")):
        stat = weights.stat()
        digest.update(f"{weights.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    digest.update(f"{level} {ort.__version__} {machine()}".encode())
    return digest.hexdigest()[:32]


def machine() -> str:
    """The CPU's model and instruction set extensions (the first CPU's ``model name`` and ``flags``
    in /proc/cpuinfo; elsewhere what ``platform`` says)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    found: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        found.setdefault(name.strip(), value.strip())
    return f"{found.get('model name', platform.processor())} {found.get('flags', '')}"


def _build(source: Path, graph: bytes | None, level: ort.GraphOptimizationLevel, target: Path) -> None:
    staging = target.parent.with_name(f".{target.parent.name}.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        options.log_severity_level = 3  # it warns that the saved graph suits this machine only: it is keyed by it
        options.optimized_model_filepath = str(staging / target.name)
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", target.name + ".data"
        )
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        options.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
        if graph is not None:  # an edited graph's external weights are those of the graph at ``source``
            options.add_session_config_entry(EXTERNAL_FOLDER, str(source.parent))
        ort.InferenceSession(graph if graph is not None else str(source), options, providers=["CPUExecutionProvider"])
        staging.rename(target.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("%s: optimized graph with prepacked weights cached in %s", source, target.parent)
