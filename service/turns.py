"""Turns at something one caller at a time may use (a document process), given by owner: the callers
waiting are served one owner after another, each owner's in arrival order, so that one key's queue
of large files delays another key's file by one of them at most, not by all (with a lock, in
arrival order, another key's file waited behind every file one key had sent before it)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Turns:
    """``async with turns.turn(owner):`` holds the turn; ``owner`` is a key, or None (no keys: every
    caller the same owner, served in arrival order). Used from one event loop."""

    def __init__(self) -> None:
        self._held = False
        # Owners in the order they are served next; each with its callers, first come first.
        self._waiting: dict[str | None, deque[asyncio.Future[None]]] = {}

    @asynccontextmanager
    async def turn(self, owner: str | None) -> AsyncIterator[None]:
        if self._held or self._waiting:
            given: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(owner, deque()).append(given)
            try:
                await given
            except asyncio.CancelledError:
                if given.done() and not given.cancelled():  # handed the turn as it was cancelled
                    self._pass_on()
                raise
        self._held = True
        try:
            yield
        finally:
            self._pass_on()

    def _pass_on(self) -> None:
        """The turn to the first caller of the next owner waiting; that owner, if it has more
        callers waiting, goes to the back, behind every other owner waiting."""
        while self._waiting:
            owner = next(iter(self._waiting))
            callers = self._waiting.pop(owner)
            given = callers.popleft()
            if callers:
                self._waiting[owner] = callers
            if not given.cancelled():  # a caller that left while it waited
                given.set_result(None)
                return
        self._held = False
