"""The translation engine in a child process, behind the same interface as ``Translator``.

Why: in one process the beam search's Python and the HTTP event loop share one GIL. Under load
the search thread held it most of the time, requests reached the batcher late, and batches stayed
small (benchmarks/RESULTS.md). In its own process the engine runs at offline speed and the event
loop only parses requests, queues texts and writes responses.

The parent keeps only the tokenizer (the batcher counts source tokens) and a pipe to each child.
With ``streams`` > 1 there is one child per stream, each a single-stream ``Translator`` on its
share of the threads, and ``translate_batch`` may be called from that many threads at once: each
call takes a free child, so that many batches are decoded at once (the batcher's ``concurrency``).
If a child dies (killed, out of memory), the batch it was running fails with ``EngineCrashed``, a
new child is started in its place, and later batches are served by it: the service stays up.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import signal
import threading
from dataclasses import replace
from multiprocessing.connection import Connection

from engine.api import ModelInfo, TranslatedBatch, TranslationOptions
from engine.bundle import load_bundle
from engine.tokenizer import Tokenizer
from engine.translator import Translator, TranslatorConfig

log = logging.getLogger(__name__)

# "spawn": forking a process that already runs onnxruntime and uvicorn threads is unsafe.
_CONTEXT = multiprocessing.get_context("spawn")


class EngineCrashed(Exception):
    """The engine process died while translating a batch; a new one has been started."""


class EngineProcess:
    """An ``engine.api.Engine`` whose translator runs in ``config.streams`` child processes."""

    def __init__(self, config: TranslatorConfig, *, nice: int = 0) -> None:
        self.config = config
        # The children load and check the whole bundle; the parent needs only its tokenizer.
        bundle = load_bundle(config.model_dir, verify_checksums=False, check_graphs=False)
        self.tokenizer = Tokenizer.from_bundle(bundle)
        child_config = replace(config, streams=1, threads=config.threads_per_stream)
        self._children: list[_Child] = []
        try:
            for _ in range(config.streams):
                self._children.append(_Child(child_config, nice))
        except BaseException:
            self.close()
            raise
        self._idle: queue.SimpleQueue[_Child] = queue.SimpleQueue()
        for child in self._children:
            self._idle.put(child)
        self.info: ModelInfo = self._children[0].info

    @property
    def pid(self) -> int | None:
        """The first child's process id."""
        return self._children[0].pid

    def count_tokens(self, text: str) -> int:
        """Source pieces of ``text`` as one sentence, EOS included (as ``Translator.count_tokens``)."""
        return len(self.tokenizer.encode(text))

    def translate_batch(self, texts: list[str], options: TranslationOptions | None = None) -> TranslatedBatch:
        child = self._idle.get()  # blocks while every child is busy
        try:
            return child.translate(texts, options)
        finally:
            self._idle.put(child)

    def close(self) -> None:
        for child in self._children:
            child.close()


class _Child:
    """One engine process and the pipe to it; restarted when it dies."""

    def __init__(self, config: TranslatorConfig, nice: int) -> None:
        self.config, self.nice = config, nice
        self._lock = threading.Lock()
        self.info = self._start()

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def translate(self, texts: list[str], options: TranslationOptions | None) -> TranslatedBatch:
        with self._lock:
            try:
                self._conn.send((texts, options))
                status, payload = self._conn.recv()
            except (EOFError, OSError) as e:
                self._stop()
                exit_code = self._process.exitcode
                self.info = self._start()
                raise EngineCrashed(f"the engine process died (exit code {exit_code}); restarted") from e
        if status == "error":
            raise payload
        return payload

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _start(self) -> ModelInfo:
        """Start a child, wait until its engine is loaded and warm; raises what loading raised."""
        self._conn, child_end = _CONTEXT.Pipe()
        args = (self.config, self.nice, child_end)
        self._process = _CONTEXT.Process(target=_serve, args=args, name="mt-engine", daemon=True)
        self._process.start()
        child_end.close()
        try:
            status, payload = self._conn.recv()
        except EOFError:
            self._process.join()
            raise RuntimeError(
                f"the engine process exited while loading (exit code {self._process.exitcode})"
            ) from None
        if status == "error":
            self._process.join()
            raise payload
        log.info("engine process %d ready", self._process.pid)
        return payload

    def _stop(self) -> None:
        with contextlib.suppress(OSError):  # already gone
            self._conn.send(None)
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()


def _serve(config: TranslatorConfig, nice: int, conn: Connection) -> None:
    """The child: load the engine, then translate batches from the pipe until told to stop."""
    # Below the HTTP process's priority: when cores are scarce, taking requests in first keeps
    # batches full, and the engine works through them on what CPU is left.
    os.nice(nice)
    # The parent decides when the engine stops (after draining on SIGTERM); a Ctrl-C that reaches
    # the whole process group must not kill the engine under requests still being served.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        translator = Translator(config)
    except Exception as e:  # sent to the parent, which raises it from EngineProcess()
        conn.send(("error", _picklable(e)))
        return
    conn.send(("ready", translator.info))
    while True:
        try:
            request = conn.recv()
        except EOFError:  # the parent is gone
            return
        if request is None:
            return
        texts, options = request
        try:
            conn.send(("ok", translator.translate_batch(texts, options)))
        except Exception as e:  # one failed batch, not a dead engine
            conn.send(("error", _picklable(e)))


def _picklable(error: Exception) -> Exception:
    """The error itself when it has a plain message (all of ours), else a RuntimeError naming it."""
    return error if error.args and all(isinstance(a, str) for a in error.args) else RuntimeError(repr(error))
