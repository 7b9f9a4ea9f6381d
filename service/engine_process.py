"""Translation engines in child processes: one process per stream, each hosting every loaded model.

Why processes: in one process the beam search's Python and the HTTP event loop share one GIL.
Under load the search thread held it most of the time, requests reached the batcher late, and
batches stayed small (benchmarks/RESULTS.md). In their own processes the engines run at offline
speed and the event loop only parses requests, queues texts and writes responses.

Why several models per process: a model repository may serve many small models, and a process
per model per stream would cost an interpreter and an onnxruntime each. ``EngineHost`` starts
``streams`` children; ``load`` loads a bundle into every child and returns a ``HostedEngine``, an
``engine.api.Engine`` whose ``close`` unloads it again. The parent keeps only each model's
tokenizer (the batcher counts source tokens).

A batch goes to the child with the fewest batches in flight. A child runs each batch it is given in
a thread of its own, and the batches it holds share its model one decoder step at a time, the least
served first (``engine.scheduler``): a short batch sent while a long one decodes is answered in
about its own time. Calls are tagged with an id, so that a batch can be cancelled while it runs
(its next step stops it) and answers come back in any order.

If a child dies (killed, out of memory), a new one is started in its place with the models the old
one hosted, at once (idle or not), and each batch it was running is tried once more on another
child (``EngineCrashed`` only if that fails too): the service stays up and its clients see nothing.
A child whose replacement cannot start (a model that no longer loads) stays down: batches go to
the children that are up, and the down one is tried again after a back-off that doubles with each
failure (or at once when no child is up: the batch would fail anyway).

Closing the host cancels the calls still waiting on its children (``concurrent.futures.
CancelledError``, which asyncio turns into a cancellation): a model still loading at shutdown is
given up at once, not waited for, and not reported as a failure.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import CancelledError, Future
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from engine.api import ModelInfo, TranslatedBatch, TranslationOptions
from engine.bundle import load_bundle
from engine.heap import release_memory
from engine.runner import start_onnxruntime
from engine.scheduler import Cancellation
from engine.tokenizer import Tokenizer
from engine.translator import Translator, TranslatorConfig
from service.memory import resident_bytes

log = logging.getLogger(__name__)

# "spawn": forking a process that already runs onnxruntime and uvicorn threads is unsafe.
_CONTEXT = multiprocessing.get_context("spawn")
GIL_SWITCH_INTERVAL_S = 0.0005
# A child that stays down is tried again after this, doubled after each failure up to the most.
RESTART_BACKOFF_S = 5.0
MAX_RESTART_BACKOFF_S = 300.0
# How long a child asked to stop may take to finish what it is doing before it is killed.
STOP_GRACE_S = 10.0


class EngineCrashed(Exception):
    """The engine process died while translating a batch; a new one has been started."""


class EngineHost:
    """``streams`` engine processes, each with ``threads`` onnxruntime threads for each model.

    ``weights_cache``: a directory for the models' optimized graphs (``engine.shared_weights``),
    from which the processes map one copy of each model's weights between them; None: each
    process holds a copy of its own."""

    def __init__(self, *, streams: int = 1, threads: int = 0, nice: int = 0, weights_cache: Path | None = None) -> None:
        self.threads, self.weights_cache = threads, weights_cache
        self._keys = itertools.count()
        self._children: list[_Child] = []
        try:
            for _ in range(streams):  # started together, then waited for
                self._children.append(_Child(nice))
            for child in self._children:
                child.serve()
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int | None]:
        return [child.pid for child in self._children]

    def load(self, config: TranslatorConfig) -> HostedEngine:
        """Load ``config``'s bundle into every child; raises what loading raised (and then no
        child keeps it)."""
        key = str(next(self._keys))
        config = replace(config, streams=1, threads=self.threads, weights_cache=self.weights_cache)
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
        """Resident memory of all children together: their PSS, in which the pages they share (the
        weights, with ``weights_cache``) count once, not once per child; RSS where /proc has no PSS."""
        return sum(_proportional_bytes(pid) for pid in self.pids if pid is not None)

    def translate(
        self, key: str, texts: list[str], options: TranslationOptions | None, cancellation: Cancellation | None = None
    ) -> TranslatedBatch:
        """On the least busy child; once more on another if that child dies under it."""
        child = self._least_busy()
        try:
            return child.translate(key, texts, options, cancellation)
        except EngineCrashed:
            log.warning("engine process died under a batch of %d texts; trying it once more", len(texts))
            return self._least_busy(besides=child).translate(key, texts, options, cancellation)

    def down(self) -> str | None:
        """Why no engine process can translate (every one is down, its restart failing); None while
        one can. Those whose restart is due are tried first: with none up, the service turns
        unready, and no batch would come to try them."""
        for child in self._children:
            child.revive()
        reasons = [child.down for child in self._children]
        return None if None in reasons else reasons[0]

    def _least_busy(self, besides: _Child | None = None) -> _Child:
        """The child with the fewest batches in flight, among those up (or due a retry) if any:
        a child that is down has none in flight, and would otherwise be picked first every time."""
        others = [c for c in self._children if c is not besides] or self._children
        return min(others, key=lambda c: (c.backing_off, c.in_flight))

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

    def translate_batch(
        self, texts: list[str], options: TranslationOptions | None = None, cancellation: Cancellation | None = None
    ) -> TranslatedBatch:
        return self.host.translate(self.key, texts, options, cancellation)

    def close(self) -> None:
        self.host.unload(self.key)


class _Child:
    """One engine process, the pipe to it and the thread that reads its answers; restarted, with
    its models, as soon as it dies."""

    def __init__(self, nice: int) -> None:
        self.nice = nice
        self.models: dict[str, TranslatorConfig] = {}  # what a replacement must load
        self._ids = itertools.count()
        self._pending: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()  # the pipe's sending end, _pending, and restarts
        self._closing = False
        self._down: str | None = None  # why the last restart failed: a later call tries again
        self._backoff_s = 0.0  # how long after the last failed restart the next one is due
        self._retry_at = 0.0  # time.monotonic() when the next restart is due
        self._spawn()  # serve() waits for it

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def backing_off(self) -> bool:
        """Down, and its next restart not due yet."""
        return self._down is not None and time.monotonic() < self._retry_at

    @property
    def down(self) -> str | None:
        """Why its last restart failed, while it is down."""
        return self._down

    def revive(self) -> None:
        """Restart it if it is down and its restart is due, as its next call would."""
        with self._lock:
            if self._down is None or self._closing or self.backing_off:
                return
            with contextlib.suppress(EngineCrashed):  # logged, and left down until the next is due
                self._restart()

    def load(self, key: str, config: TranslatorConfig) -> ModelInfo:
        info = self._call("load", key, config)
        self.models[key] = config
        return info

    def unload(self, key: str) -> None:
        with self._lock:
            # A child that is down holds no model: restarting it only to unload one would fail
            # (its replacement starts without that model) or load the others for nothing.
            if self.models.pop(key, None) is None or self._down is not None:
                return
        self._call("unload", key)

    def translate(
        self, key: str, texts: list[str], options: TranslationOptions | None, cancellation: Cancellation | None
    ) -> TranslatedBatch:
        return self._call("translate", key, texts, options, cancellation=cancellation)

    def close(self) -> None:
        with self._lock:
            self._closing = True
            self.models.clear()  # gone with the process: nothing is left to unload
            # A call still running (a model loading at shutdown) is given up, not waited for.
            self._stop(grace_s=0 if self._pending else STOP_GRACE_S)

    def _call(self, *request: Any, cancellation: Cancellation | None = None) -> Any:
        future: Future[Any] = Future()
        with self._lock:
            if self._closing:  # no reader is left to answer it
                raise CancelledError("the engine process was closed")
            if self._down is not None:
                self._restart()
            call = next(self._ids)
            self._pending[call] = future
            with contextlib.suppress(OSError):  # died since: the reader fails the call and restarts the child
                self._conn.send((call, *request))
        if cancellation is not None:
            cancellation.on_set(lambda: self._send_quietly((call, "cancel")))
        return future.result()

    def _send_quietly(self, message: tuple[Any, ...]) -> None:
        with self._lock, contextlib.suppress(OSError):
            self._conn.send(message)

    def _read(self, conn: Connection) -> None:
        """The reader thread: hand each answer to its caller; when the child dies, restart it."""
        while True:
            try:
                call, status, payload = conn.recv()
            except (EOFError, OSError):
                break
            future = self._pending.pop(call, None)
            if future is None:
                continue
            if status == "error":
                future.set_exception(payload)
            else:
                future.set_result(payload)
        with self._lock:
            failed, self._pending = self._pending, {}
            if self._closing:  # closed under its calls: they are cancelled, not failed
                for future in failed.values():
                    future.cancel()
                return
            error = EngineCrashed("the engine process died")
            try:
                self._stop()
                error = EngineCrashed(f"the engine process died (exit code {self._process.exitcode}); restarted")
                self._restart()
            except EngineCrashed as failed_restart:
                error = failed_restart
            finally:
                for future in failed.values():
                    future.set_exception(error)

    def _restart(self) -> None:
        """Start a replacement, under the lock. One that fails (killed while it loads its models,
        or a model that no longer loads) leaves the child down rather than without a reader, whose
        calls would wait for ever: its next call tries again, and fails at once if that fails too.
        Each failure doubles the back-off during which ``EngineHost`` sends batches elsewhere."""
        try:
            self._start()
        except Exception as exc:
            self._stop()
            self._down = f"{type(exc).__name__}: {exc}"
            self._backoff_s = min(2 * self._backoff_s or RESTART_BACKOFF_S, MAX_RESTART_BACKOFF_S)
            self._retry_at = time.monotonic() + self._backoff_s
            log.error(
                "engine process could not be restarted (tried again in %g s, or when no other is up): %s",
                self._backoff_s,
                self._down,
            )
            raise EngineCrashed(f"the engine process died and could not be restarted: {self._down}") from exc
        self._down = None
        self._backoff_s = 0.0

    def _start(self) -> None:
        """Start a child and load this child's models into it; raises what loading raised."""
        self._spawn()
        self.serve()

    def _spawn(self) -> None:
        self._conn, child_end = _CONTEXT.Pipe()
        self._process = _CONTEXT.Process(target=_serve, args=(self.nice, child_end), name="mt-engine", daemon=True)
        self._process.start()
        child_end.close()

    def serve(self) -> None:
        """Wait until the spawned child is ready, load this child's models into it and read its
        answers. Ready means started: its memory from then on is what the models it loads hold
        (``EngineHost.resident_bytes`` measured while it started charged its start to the first)."""
        try:
            self._conn.recv()
        except EOFError:
            self._process.join()
            raise EngineCrashed(f"the engine process died as it started (exit code {self._process.exitcode})") from None
        for key, config in self.models.items():
            self._conn.send((-1, "load", key, config))
            _, status, payload = self._conn.recv()
            if status == "error":
                raise payload
        threading.Thread(target=self._read, args=(self._conn,), name="mt-engine-reader", daemon=True).start()
        log.info("engine process %d ready with %d models", self._process.pid, len(self.models))

    def _stop(self, grace_s: float = STOP_GRACE_S) -> None:
        with contextlib.suppress(OSError):  # already gone
            self._conn.send(None)
        self._process.join(timeout=grace_s)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()


def _serve(nice: int, conn: Connection) -> None:
    """The child: load and unload models as the pipe says, and run each batch in a thread of its
    own (its translator's scheduler interleaves them step by step), until told to stop."""
    # Below the HTTP process's priority: when cores are scarce, taking requests in first keeps
    # batches full, and the engine works through them on what CPU is left.
    os.nice(nice)
    # The parent decides when the engine stops (after draining on SIGTERM); a Ctrl-C that reaches
    # the whole process group must not kill the engine under requests still being served.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The batches' threads take turns for the model, but share the GIL for the search's Python
    # between turns: a short batch's thread must not wait out a long batch's 5 ms default slices.
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    start_onnxruntime()
    release_memory()
    conn.send("ready")
    translators: dict[str, Translator] = {}
    running: dict[int, Cancellation] = {}
    sending = threading.Lock()

    def answer(call: int, status: str, payload: Any) -> None:
        with sending:
            conn.send((call, status, payload))

    def translate(call: int, key: str, texts: list[str], options: TranslationOptions | None) -> None:
        try:
            answer(call, "ok", translators[key].translate_batch(texts, options, running[call]))
        except Exception as e:  # one failed batch, not a dead engine
            answer(call, "error", _picklable(e))
        finally:
            running.pop(call, None)

    while True:
        try:
            request = conn.recv()
        except EOFError:  # the parent is gone
            return
        if request is None:
            return
        match request:
            case (call, "translate", key, texts, options):
                running[call] = Cancellation()
                threading.Thread(target=translate, args=(call, key, texts, options), daemon=True).start()
            case (call, "cancel"):
                cancellation = running.get(call)
                if cancellation is not None:
                    cancellation.set()
            case (call, *admin):
                try:
                    answer(call, "ok", _administer(translators, admin))
                except Exception as e:
                    answer(call, "error", _picklable(e))


def _administer(translators: dict[str, Translator], request: list[Any]) -> Any:
    match request:
        case ["load", key, config]:
            translators[key] = Translator(config)
            release_memory()  # what loading used and freed: not the model's, and not kept
            return translators[key].info
        case ["unload", key]:
            translators.pop(key).close()
            release_memory()
            return None
    raise ValueError(f"unknown engine request {request[0]!r}")


def _proportional_bytes(pid: int) -> int:
    """A process's proportional set size (each page it shares with N processes counted 1/N)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            pss = next(line for line in f if line.startswith("Pss:"))
    except (OSError, StopIteration):  # not Linux (or older than 4.14), or the process is gone
        return resident_bytes(pid)
    return int(pss.split()[1]) * 1024


def _picklable(error: Exception) -> Exception:
    """The error itself when it has a plain message (all of ours), else a RuntimeError naming it."""
    return error if error.args and all(isinstance(a, str) for a in error.args) else RuntimeError(repr(error))
