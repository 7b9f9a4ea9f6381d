"""The models the service serves: loaded at start or on first use, unloaded when over budget.

``ModelPool`` holds a slot per bundle of the repository (``engine.repository``). A slot's model is
loaded by an ``EngineLoader`` (engine processes, or translators in this process) and gets its own
``Batcher``, so that batches never mix models and a slow model only queues its own requests.
Requests ``use`` a model: it loads if needed and cannot be unloaded while in use. After a load
and after each use, least recently used idle models are unloaded until the loaded ones fit
``MT_MAX_LOADED_MODELS`` and ``MT_MAX_LOADED_MB`` (memory as measured when each loaded). A bundle
that fails to load keeps its error, shown by ``/v1/models`` and readiness; the others keep serving.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Protocol

from engine.api import Engine, ModelInfo
from engine.bundle import BundleError
from engine.heap import release_memory
from engine.repository import ModelEntry
from engine.runner import start_onnxruntime
from engine.translator import Translator, TranslatorConfig
from service.batcher import Batcher, BatcherConfig
from service.errors import Unavailable
from service.memory import resident_bytes
from service.metrics import Metrics

log = logging.getLogger(__name__)


class EngineLoader(Protocol):
    """Loads a bundle as an ``Engine`` (whose ``close`` unloads it) and tells the memory it holds."""

    def load(self, config: TranslatorConfig) -> Engine: ...

    def resident_bytes(self) -> int: ...

    def down(self) -> str | None:
        """Why no engine can translate now, though models are loaded; None while one can."""
        ...

    def close(self) -> None: ...


class InProcessLoader:
    """Engines in this process: ``Translator``, or what a test passes instead. As in an engine
    process, onnxruntime's once-per-process costs are paid first and the heap's free pages are
    given back before each measure, so that a model's measured memory is what it holds."""

    def __init__(self, factory: Callable[[TranslatorConfig], Engine] = Translator) -> None:
        self.factory = factory
        if factory is Translator:
            start_onnxruntime()

    def load(self, config: TranslatorConfig) -> Engine:
        return self.factory(config)

    def resident_bytes(self) -> int:
        release_memory()  # measured, before a load as after it, without the free pages the heap keeps
        return resident_bytes()

    def down(self) -> str | None:
        return None  # an engine in this process is up as long as the process is

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class PoolConfig:
    translator: TranslatorConfig  # for every model; its model_dir is replaced by each bundle's
    batcher: BatcherConfig
    max_loaded_models: int = 0  # 0: no limit
    max_loaded_bytes: int = 0  # 0: no limit


@dataclass(eq=False)
class Loaded:
    engine: Engine
    batcher: Batcher
    memory_bytes: int
    last_used: float
    users: int = 0


@dataclass(eq=False)
class ModelSlot:
    entry: ModelEntry
    lock: asyncio.Lock
    loaded: Loaded | None = None
    error: str | None = None
    info: ModelInfo | None = None  # kept after unloading, for /v1/models


class ModelPool:
    def __init__(self, entries: Iterable[ModelEntry], config: PoolConfig, loader: EngineLoader, metrics: Metrics):
        self.config, self.loader, self.metrics = config, loader, metrics
        self.slots = {e.id: ModelSlot(e, asyncio.Lock(), error=e.error) for e in entries}
        self._load_lock = asyncio.Lock()  # one load at a time: its memory is measured around it
        self._abandoned: set[asyncio.Task[None]] = set()  # loads whose requester left, until released
        for model in self.slots:
            metrics.add_model(model)

    @asynccontextmanager
    async def use(self, model: str) -> AsyncIterator[Loaded]:
        """The model, loaded and held loaded until the block ends; Unavailable (503) if it cannot load."""
        slot = self.slots[model]
        loaded = await self._acquire(slot)
        try:
            yield loaded
        finally:
            await self._release(loaded)

    async def preload(self, models: Iterable[str]) -> None:
        """Load ``models`` now (in order; with a budget, later ones may unload earlier ones)."""
        for model in models:
            try:
                async with self.use(model):
                    pass
            except Unavailable:
                pass  # recorded in the slot and logged

    def loaded_count(self) -> int:
        return sum(slot.loaded is not None for slot in self.slots.values())

    async def close(self) -> None:
        # An abandoned load still running would put its engine in a slot after these are emptied.
        await asyncio.gather(*self._abandoned, return_exceptions=True)
        for slot in self.slots.values():
            if slot.loaded is not None:
                await slot.loaded.batcher.close()
                slot.loaded.engine.close()
                slot.loaded = None
        self.loader.close()

    # -- loading and unloading ---------------------------------------------------------------

    async def _acquire(self, slot: ModelSlot) -> Loaded:
        """The slot's model with one more user, counted before any await so that no unload in
        between can take it. A load goes on when its requester leaves (a client disconnecting, a
        deadline): the thread that loads cannot be stopped, and the engine it returns must reach
        the slot, where the budget can unload it, instead of staying loaded in the engine
        processes with nothing left to unload it."""
        if slot.loaded is not None:
            slot.loaded.users += 1
            loaded = slot.loaded
        else:
            loading = asyncio.ensure_future(self._load_for_user(slot))
            try:
                loaded = await asyncio.shield(loading)
            except asyncio.CancelledError:
                task = asyncio.ensure_future(self._release_when_loaded(loading))
                self._abandoned.add(task)
                task.add_done_callback(self._abandoned.discard)
                raise
        await self._fit_budget()
        return loaded

    async def _load_for_user(self, slot: ModelSlot) -> Loaded:
        """The slot's model, loaded if it is not, with one more user."""
        async with slot.lock:
            if slot.loaded is None:
                if slot.error is not None:
                    raise Unavailable(f"model {slot.entry.id!r} is unavailable: {slot.error}")
                slot.loaded = await self._load(slot)
            slot.loaded.users += 1
            return slot.loaded

    async def _release_when_loaded(self, loading: asyncio.Future[Loaded]) -> None:
        """Release the user a load counted for a requester that has left, once it is loaded."""
        try:
            loaded = await loading
        except Unavailable:
            return  # recorded in the slot
        await self._release(loaded)

    async def _release(self, loaded: Loaded) -> None:
        """One user fewer; then unload what the budget no longer fits."""
        loaded.users -= 1
        loaded.last_used = time.monotonic()
        await self._fit_budget()

    async def _load(self, slot: ModelSlot) -> Loaded:
        model = slot.entry.id
        config = replace(self.config.translator, model_dir=slot.entry.path)
        async with self._load_lock:
            before = self.loader.resident_bytes()
            try:
                engine = await asyncio.to_thread(self.loader.load, config)
            except Exception as e:
                slot.error = f"could not be loaded: {e}"
                self.metrics.model_load_failures.labels(model).inc()
                # A bundle that cannot serve (a variant it lacks, a file missing) says why in one
                # line; anything else is a bug, with its traceback.
                expected = isinstance(e, BundleError)
                log.error("model %s could not be loaded from %s: %s", model, slot.entry.path, e, exc_info=not expected)
                raise Unavailable(f"model {model!r} is unavailable: {slot.error}") from None
            memory = max(0, self.loader.resident_bytes() - before)
        batcher = Batcher(engine, self.config.batcher, self.metrics, model=model)
        batcher.start()
        info = slot.info = engine.info
        m = self.metrics
        m.model_info.labels(model, info.version, info.variant, info.provider).set(1)
        m.model_loaded.labels(model).set(1)
        m.model_memory.labels(model).set(memory)
        m.model_loads.labels(model).inc()
        log.info("model %s %s (%s, %s) loaded: %.0f MB", model, info.version, info.variant, info.provider, memory / 1e6)
        return Loaded(engine, batcher, memory, last_used=time.monotonic())

    async def _fit_budget(self) -> None:
        """Unload least recently used idle models while the loaded ones exceed the budget."""
        while self._over_budget():
            idle = [s for s in self.slots.values() if s.loaded is not None and s.loaded.users == 0]
            if not idle:
                return  # every loaded model is serving a request: unload once one is done
            await self._unload(min(idle, key=lambda s: s.loaded.last_used if s.loaded else 0.0))

    def _over_budget(self) -> bool:
        c = self.config
        if not (c.max_loaded_models or c.max_loaded_bytes):  # asked after every request: no budget, no walk
            return False
        loaded = [s.loaded for s in self.slots.values() if s.loaded is not None]
        too_many = c.max_loaded_models and len(loaded) > c.max_loaded_models
        too_big = c.max_loaded_bytes and len(loaded) > 1 and sum(x.memory_bytes for x in loaded) > c.max_loaded_bytes
        return bool(too_many or too_big)

    async def _unload(self, slot: ModelSlot) -> None:
        loaded = slot.loaded
        if loaded is None or loaded.users:
            return
        slot.loaded = None  # from here on, a new request loads it again (after this unload: the lock)
        async with slot.lock:
            await loaded.batcher.close()
            await asyncio.to_thread(loaded.engine.close)
        model = slot.entry.id
        info = loaded.engine.info
        m = self.metrics
        m.model_info.remove(model, info.version, info.variant, info.provider)
        m.model_loaded.labels(model).set(0)
        m.model_memory.labels(model).set(0)
        m.model_unloads.labels(model).inc()
        log.info("model %s unloaded (least recently used, over budget)", model)
