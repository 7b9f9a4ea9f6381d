"""Turns at something a few callers at a time may use (a document process, one; DeepL's document
workers, two), given by owner: the callers waiting are served one owner after another, each owner's
in arrival order, so that one key's queue of large files delays another key's file by one of them
at most, not by all (with a lock or a semaphore, in arrival order, another key's file waited behind
every file one key had sent before it)."""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Turns:
    """``async with turns.turn(owner):`` holds one of ``capacity`` turns; ``owner`` is a key, or None
    (no keys: every caller the same owner, served in arrival order). Used from one event loop."""

    def __init__(self, capacity: int = 1) -> None:
        self.capacity = capacity
        self._held = 0
        self._holding: Counter[str | None] = Counter()  # the turns each owner holds
        # Owners in the order they are served next; each with its callers, first come first.
        self._waiting: dict[str | None, deque[asyncio.Future[None]]] = {}

    @asynccontextmanager
    async def turn(self, owner: str | None) -> AsyncIterator[None]:
        if self._held < self.capacity and not self._waiting:
            self._held += 1
            self._holding[owner] += 1
        else:  # a turn is handed over by a caller that leaves it (``_pass_on``)
            given: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(owner, deque()).append(given)
            try:
                await given
            except asyncio.CancelledError:
                if given.done() and not given.cancelled():  # handed the turn as it was cancelled
                    self._pass_on(owner)
                raise
        try:
            yield
        finally:
            self._pass_on(owner)

    def _pass_on(self, leaving: str | None) -> None:
        """``leaving``'s turn to the first caller of the owner waiting that holds the fewest turns,
        the first of those in line; that owner, if it has more callers waiting, goes to the back."""
        self._holding[leaving] -= 1
        if not self._holding[leaving]:
            del self._holding[leaving]  # keys come and go: only those holding a turn are kept
        while self._waiting:
            owner = min(self._waiting, key=self._holding.__getitem__)
            callers = self._waiting.pop(owner)
            given = callers.popleft()
            if callers:
                self._waiting[owner] = callers
            if not given.cancelled():  # a caller that left while it waited
                self._holding[owner] += 1
                given.set_result(None)
                return
        self._held -= 1
