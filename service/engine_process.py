"""Translation engines in child processes: one process per stream, each hosting every loaded model.

Why processes: in one process the beam search's Python and the HTTP event loop share one GIL.
Under load the search thread held it most of the time, requests reached the batcher late, and
batches stayed small (benchmarks/RESULTS.md). In their own processes the engines run at offline
speed and the event loop only parses requests, queues texts and writes responses.

Why several models per process: a model repository may serve many small models, and a process
per model per stream would cost an interpreter and an onnxruntime each. ``EngineHost`` starts
``streams`` children; ``load`` loads a bundle into every child and returns a ``HostedEngine``, an
``engine.api.Engine`` whose ``close`` unloads it again. The parent keeps only each model's
tokenizer (the batcher counts source tokens). A batch takes any free child, so that ``streams``
batches, of any models, are decoded at once. If a child dies (killed, out of memory), the batch it
was running fails with ``EngineCrashed``, a new child is started in its place with the models the
old one hosted, and later batches are served by it: the service stays up.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import queue
import signal
import threading
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

from engine.api import ModelInfo, TranslatedBatch, TranslationOptions
from engine.bundle import load_bundle
from engine.tokenizer import Tokenizer
from engine.translator import Translator, TranslatorConfig
from service.memory import resident_bytes

log = logging.getLogger(__name__)

# "spawn": forking a process that already runs onnxruntime and uvicorn threads is unsafe.
_CONTEXT = multiprocessing.get_context("spawn")


class EngineCrashed(Exception):
    """The engine process died while translating a batch; a new one has been started."""


class EngineHost:
    """``streams`` engine processes, each with ``threads`` onnxruntime threads for each model."""

    def __init__(self, *, streams: int = 1, threads: int = 0, nice: int = 0) -> None:
        self.threads = threads
        self._keys = itertools.count()
        self._children: list[_Child] = []
        try:
            for _ in range(streams):
                self._children.append(_Child(nice))
        except BaseException:
            self.close()
            raise
        self._idle: queue.SimpleQueue[_Child] = queue.SimpleQueue()
        for child in self._children:
            self._idle.put(child)

    @property
    def pids(self) -> list[int | None]:
        return [child.pid for child in self._children]

    def load(self, config: TranslatorConfig) -> HostedEngine:
        """Load ``config``'s bundle into every child; raises what loading raised (and then no
        child keeps it)."""
        key = str(next(self._keys))
        config = replace(config, streams=1, threads=self.threads)
        loaded: list[_Child] = []
        try:
            for child in self._children:
                info = child.load(key, config)
                loaded.append(child)
        except BaseException:
            for child in loaded:
                child.unload(key)
            raise
        return HostedEngine(self, key, config, info)

    def resident_bytes(self) -> int:
        """Resident memory of all children together."""
        return sum(resident_bytes(pid) for pid in self.pids if pid is not None)

    def translate(self, key: str, texts: list[str], options: TranslationOptions | None) -> TranslatedBatch:
        child = self._idle.get()  # blocks while every child is busy
        try:
            return child.translate(key, texts, options)
        finally:
            self._idle.put(child)

    def unload(self, key: str) -> None:
        for child in self._children:
            child.unload(key)

    def close(self) -> None:
        for child in self._children:
            child.close()


class HostedEngine:
    """One model loaded into an ``EngineHost``'s processes; implements ``engine.api.Engine``."""

    def __init__(self, host: EngineHost, key: str, config: TranslatorConfig, info: ModelInfo) -> None:
        self.host, self.key, self.info = host, key, info
        # The children load and check the whole bundle; the parent needs only its tokenizer.
        self.tokenizer = Tokenizer.from_bundle(
            load_bundle(config.model_dir, verify_checksums=False, check_graphs=False)
        )

    def count_tokens(self, text: str) -> int:
        """Source pieces of ``text`` as one sentence, EOS included (as ``Translator.count_tokens``)."""
        return len(self.tokenizer.encode(text))

    def translate_batch(self, texts: list[str], options: TranslationOptions | None = None) -> TranslatedBatch:
        return self.host.translate(self.key, texts, options)

    def close(self) -> None:
        self.host.unload(self.key)


class _Child:
    """One engine process and the pipe to it; restarted, with its models, when it dies."""

    def __init__(self, nice: int) -> None:
        self.nice = nice
        self.models: dict[str, TranslatorConfig] = {}  # what a replacement must load
        self._lock = threading.Lock()
        self._start()

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def load(self, key: str, config: TranslatorConfig) -> ModelInfo:
        info = self._call(("load", key, config))
        self.models[key] = config
        return info

    def unload(self, key: str) -> None:
        if self.models.pop(key, None) is not None:
            self._call(("unload", key))

    def translate(self, key: str, texts: list[str], options: TranslationOptions | None) -> TranslatedBatch:
        return self._call(("translate", key, texts, options))

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _call(self, request: tuple[Any, ...]) -> Any:
        with self._lock:
            try:
                self._conn.send(request)
                status, payload = self._conn.recv()
            except (EOFError, OSError) as e:
                self._stop()
                exit_code = self._process.exitcode
                self._start()
                raise EngineCrashed(f"the engine process died (exit code {exit_code}); restarted") from e
        if status == "error":
            raise payload
        return payload

    def _start(self) -> None:
        """Start a child and load this child's models into it; raises what loading raised."""
        self._conn, child_end = _CONTEXT.Pipe()
        self._process = _CONTEXT.Process(target=_serve, args=(self.nice, child_end), name="mt-engine", daemon=True)
        self._process.start()
        child_end.close()
        for key, config in self.models.items():
            self._conn.send(("load", key, config))
            status, payload = self._conn.recv()
            if status == "error":
                raise payload
        log.info("engine process %d ready with %d models", self._process.pid, len(self.models))

    def _stop(self) -> None:
        with contextlib.suppress(OSError):  # already gone
            self._conn.send(None)
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()


def _serve(nice: int, conn: Connection) -> None:
    """The child: load, unload and run translators as the pipe says, until told to stop."""
    # Below the HTTP process's priority: when cores are scarce, taking requests in first keeps
    # batches full, and the engine works through them on what CPU is left.
    os.nice(nice)
    # The parent decides when the engine stops (after draining on SIGTERM); a Ctrl-C that reaches
    # the whole process group must not kill the engine under requests still being served.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    translators: dict[str, Translator] = {}
    while True:
        try:
            request = conn.recv()
        except EOFError:  # the parent is gone
            return
        if request is None:
            return
        try:
            conn.send(("ok", _handle(translators, request)))
        except Exception as e:  # one failed request, not a dead engine
            conn.send(("error", _picklable(e)))


def _handle(translators: dict[str, Translator], request: tuple[Any, ...]) -> Any:
    match request:
        case ("load", key, config):
            translators[key] = Translator(config)
            return translators[key].info
        case ("unload", key):
            translators.pop(key).close()
            return None
        case ("translate", key, texts, options):
            return translators[key].translate_batch(texts, options)
    raise ValueError(f"unknown engine request {request[0]!r}")


def _picklable(error: Exception) -> Exception:
    """The error itself when it has a plain message (all of ours), else a RuntimeError naming it."""
    return error if error.args and all(isinstance(a, str) for a in error.args) else RuntimeError(repr(error))
