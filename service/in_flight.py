"""The translation requests in flight: counted so that a shutdown drains them (SIGTERM: unready,
new requests refused, those accepted finished), and ended with a 503 in their route's shape when
the drain runs out, where the server cancelling them would answer a bare 500."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from service.errors import Unavailable
from service.metrics import Metrics

log = logging.getLogger(__name__)
T = TypeVar("T")

STOPPED = "the service shut down before the translation finished: try again"


class InFlight:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.draining = False
        # The deadlines of the translations running, which a drain that runs out ends (``stopping``).
        self._running: set[asyncio.Timeout] = set()
        self._stopped = False  # the drain ran out: translations still running are answered 503
        self._count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> None:
        """Count an accepted translation request in flight; refuse it while draining."""
        if self.draining:
            raise Unavailable("the service is shutting down")
        self._count += 1
        self._idle.clear()
        self.metrics.in_flight.set(self._count)

    def leave(self) -> None:
        self._count -= 1
        self.metrics.in_flight.set(self._count)
        if self._count == 0:
            self._idle.set()

    def start_draining(self) -> None:
        """Turn unready and refuse new translation requests from now on (``enter`` raises)."""
        self.draining = True

    async def drain(self, timeout_s: float) -> bool:
        """Drain: wait up to ``timeout_s`` for accepted requests; True if all finished."""
        self.start_draining()
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
        except TimeoutError:
            log.warning("drain: %d requests still running after %g s; answering them 503", self._count, timeout_s)
            self._stop_running()
            return False
        return True

    async def stopping(self, work: Awaitable[T]) -> T:
        """``work``, ended by a drain that runs out: a deadline of its own (no timer until then),
        which cancels it as ``asyncio.timeout`` does, and so drops its queued texts. Work that
        starts after that is ended at its first wait."""
        deadline = asyncio.timeout(0 if self._stopped else None)
        self._running.add(deadline)
        try:
            async with deadline:
                return await work
        except TimeoutError:
            if not deadline.expired():
                raise
            raise Unavailable(STOPPED) from None
        finally:
            self._running.discard(deadline)

    def _stop_running(self) -> None:
        """End every translation still running with Unavailable."""
        self._stopped = True
        now = asyncio.get_running_loop().time()
        for deadline in self._running:
            deadline.reschedule(now)
