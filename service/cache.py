"""An LRU cache of finished translations, keyed by model (name, version, variant), text and options.

Used only from the event loop, so it needs no lock. Results are shared between requests and must
be treated as immutable.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class TranslationCache(Generic[V]):
    """``capacity`` entries at most; ``capacity == 0`` turns the cache off (every lookup misses)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"cache capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, str, Hashable], V] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, model: str, text: str, options: Hashable) -> V | None:
        key = (model, text, options)
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, model: str, text: str, options: Hashable, value: V) -> None:
        if not self.enabled:
            return
        key = (model, text, options)
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
