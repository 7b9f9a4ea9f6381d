"""The model pool against a fake loader whose memory the test sets: loading on first use, the LRU
budget by count and by memory, models in use kept, failures kept per model."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.repository import ModelEntry
from engine.translator import TranslatorConfig
from service.batcher import BatcherConfig
from service.errors import Unavailable
from service.metrics import Metrics
from service.models import ModelPool, PoolConfig

MB = 1_000_000


class FakeEngine:
    def __init__(self, loader: FakeLoader, name: str) -> None:
        self.loader, self.name = loader, name
        self.info = SimpleNamespace(name=name, version="1", variant="fp32", provider="cpu")

    def count_tokens(self, text: str) -> int:
        return 1

    def translate_batch(self, texts: list[str], options: Any, cancellation: Any = None) -> Any:
        raise AssertionError("not translated in these tests")

    def close(self) -> None:
        self.loader.loaded.remove(self.name)


class FakeLoader:
    """Loads a model named by its directory; each holds ``sizes[name]`` bytes while loaded."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes
        self.loaded: list[str] = []
        self.loads: list[str] = []

    def load(self, config: TranslatorConfig) -> FakeEngine:
        name = Path(config.model_dir).name
        if name == "broken":
            raise ValueError("broken graph")
        self.loaded.append(name)
        self.loads.append(name)
        return FakeEngine(self, name)

    def resident_bytes(self) -> int:
        return sum(self.sizes[name] for name in self.loaded)

    def close(self) -> None:
        pass


class GatedLoader(FakeLoader):
    """A loader whose loads wait until the test opens ``gate``, telling it (``loading``) that one has begun."""

    def __init__(self, sizes: dict[str, int]) -> None:
        super().__init__(sizes)
        self.loading, self.gate = threading.Event(), threading.Event()

    def load(self, config: TranslatorConfig) -> FakeEngine:
        self.loading.set()
        assert self.gate.wait(timeout=10), "the test never opened the gate"
        return super().load(config)


def pool(loader: FakeLoader, **budget: int) -> tuple[ModelPool, Metrics]:
    entries = [ModelEntry(id=name, path=Path(name)) for name in loader.sizes]
    metrics = Metrics()
    return ModelPool(entries, PoolConfig(TranslatorConfig(), BatcherConfig(), **budget), loader, metrics), metrics


def test_models_load_on_first_use_and_the_least_recently_used_unloads() -> None:
    async def main() -> None:
        loader = FakeLoader({"a": 10 * MB, "b": 10 * MB, "c": 10 * MB})
        models, metrics = pool(loader, max_loaded_models=2)
        for name in ("a", "b", "a", "c"):  # "b" is then the least recently used
            async with models.use(name) as loaded:
                assert loaded.memory_bytes == 10 * MB
        assert sorted(loader.loaded) == ["a", "c"] and loader.loads == ["a", "b", "c"]
        assert metrics.registry.get_sample_value("mt_model_unloads_total", {"model": "b"}) == 1
        async with models.use("b"):
            pass
        assert sorted(loader.loaded) == ["b", "c"] and loader.loads == ["a", "b", "c", "b"]
        await models.close()
        assert loader.loaded == []

    asyncio.run(main())


def test_a_memory_budget_unloads_until_the_rest_fit_but_never_a_model_in_use() -> None:
    async def main() -> None:
        loader = FakeLoader({"small": 10 * MB, "medium": 30 * MB, "large": 50 * MB})
        models, _ = pool(loader, max_loaded_bytes=70 * MB)
        async with models.use("small"), models.use("medium"), models.use("large"):
            assert len(loader.loaded) == 3  # 90 MB, but all three are in use
        # Released in reverse order: "large" first, so it is the least recently used; without it 40 MB.
        assert sorted(loader.loaded) == ["medium", "small"]
        async with models.use("large"):
            pass
        assert sorted(loader.loaded) == ["large", "small"]  # "medium" made room: 60 MB fit
        await models.close()

    asyncio.run(main())


def test_a_failed_load_is_kept_and_the_others_serve() -> None:
    async def main() -> None:
        loader = FakeLoader({"ok": MB, "broken": MB})
        models, metrics = pool(loader)
        await models.preload(["broken", "ok"])
        assert models.slots["broken"].error == "could not be loaded: broken graph"
        assert models.loaded_count() == 1
        with pytest.raises(Unavailable, match="'broken' is unavailable: could not be loaded"):
            async with models.use("broken"):
                pass
        assert metrics.registry.get_sample_value("mt_model_load_failures_total", {"model": "broken"}) == 1
        await models.close()

    asyncio.run(main())


def test_a_load_whose_requester_left_is_kept_in_the_pool_and_unloaded_by_the_budget() -> None:
    """A client that disconnects (or a deadline that passes) while its model loads: the load goes
    on in its thread, and the engine must reach the pool, which unloads it under the budget, rather
    than stay loaded with nothing to unload it."""

    async def main() -> None:
        loader = GatedLoader({"a": 10 * MB, "b": 10 * MB})
        models, metrics = pool(loader, max_loaded_models=1)

        async def use_a() -> None:
            async with models.use("a"):
                raise AssertionError("the requester left before its model loaded")

        requester = asyncio.create_task(use_a())
        await asyncio.to_thread(loader.loading.wait, 10)
        requester.cancel()
        with pytest.raises(asyncio.CancelledError):
            await requester
        loader.gate.set()
        async with models.use("b"):  # loads once "a" has: only one model may stay loaded
            pass
        assert loader.loaded == ["b"] and loader.loads == ["a", "b"]
        unloads = metrics.registry.get_sample_value("mt_model_unloads_total", {"model": "a"})
        assert metrics.registry.get_sample_value("mt_model_loads_total", {"model": "a"}) == unloads == 1
        await models.close()
        assert loader.loaded == []

    asyncio.run(main())
