"""Who is calling, and what they may still use: the key check of every translation and glossary
route, and the metering of the characters each translation takes (``service.keys``).

Where keys are required (MT_REQUIRE_KEYS, or MT_API_KEYS), a request's key is one of MT_API_KEYS
(no limits; checked in memory) or a managed key, read from the state database and then trusted for
``KEY_RECHECK_S`` (a revoked key is refused on every replica within that time); a managed key's
every request is counted against its rate, in the database. Where they are not, every caller is
anonymous: no key is read and nothing is refused.

A translation's characters are counted (``metered``) before it is translated, within its key's
monthly quota, and taken back if it fails; they are counted for anonymous callers and MT_API_KEYS'
keys too, for ``/v2/usage``, but these have no quota to keep: their counts are added up in the
process and written every ``COUNT_EVERY_S`` (a write per request cost the HTTP process a fifth
more CPU per request at 64 clients: benchmarks/RESULTS.md, section 24).

While the database cannot be reached: a managed key read from it within MT_KEY_TRUST_S is served,
its requests and characters not counted; any other managed key is answered 503
(``DatabaseUnavailable``); MT_API_KEYS' keys and anonymous callers are served (their characters not
counted), at once: the database is tried again ``RETRY_S`` after each failure, not by every request.
One line is logged as the database goes away and one as it comes back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

from service.database import RETRY_S, migrated
from service.errors import DatabaseUnavailable, QuotaExceeded, RateLimited, Unauthorized
from service.keys import ApiKey, Charge, KeyStore, OverQuota, could_be_managed, digest, seconds_to_next_month
from service.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

DB_THREADS = 4
# How long a managed key read from the database is used before it is read again: how long a
# revocation or a change of limits takes to reach every replica.
KEY_RECHECK_S = 10.0
# How often the characters of callers without a quota, added up in the process, are written.
COUNT_EVERY_S = 1.0
KEY_REQUIRED = "an API key is required (Authorization: Bearer <key>)"
INVALID_KEY = "invalid API key"


@dataclass(frozen=True)
class Caller:
    owner: str  # whose glossaries and usage: the key's digest, "" where keys are not required
    key: ApiKey | None = None  # a managed key, with its limits; None: one of MT_API_KEYS, or none


ANONYMOUS = Caller("")


@dataclass(frozen=True)
class _Read:
    key: ApiKey
    at: float  # on the monotonic clock


class Access:
    def __init__(
        self,
        settings: Settings,
        keys: KeyStore | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.keys = keys
        self.clock = clock
        self._configured = frozenset(digest(k) for k in settings.api_key_set)
        self._keys_required = settings.keys_required  # read once, as the keys are: asked twice a request
        self._read: dict[str, _Read] = {}  # by digest: managed keys read from the database
        self._threads = ThreadPoolExecutor(DB_THREADS, thread_name_prefix="mt-state")
        self._migrated = False
        self._problem: str | None = None  # why the database could not be used, while it cannot
        self._retry_at = 0.0  # on the monotonic clock: when to try the database again
        self._uncounted: Counter[str] = Counter()  # by owner: characters of callers without a quota, not yet written
        self._counting: asyncio.Task[None] | None = None

    # -- keys ---------------------------------------------------------------------------------

    def check(self, key: str | None, *, unread: bool = False) -> Caller:
        """The caller of ``key`` where it is known already: one of MT_API_KEYS, or a managed key
        this replica has read (``authorize``, which every route calls first); Unauthorized else,
        unless ``unread`` lets a key of a managed key's form not read yet through (then without
        its limits: ``authorize`` must still read it)."""
        if not self._keys_required:
            return ANONYMOUS
        hashed = self._hashed(key)
        if hashed in self._configured:
            return Caller(hashed)
        if (read := self._read.get(hashed)) is not None:
            return Caller(hashed, read.key)
        if unread and self.keys is not None and key is not None and could_be_managed(key):
            return Caller(hashed)
        raise Unauthorized(INVALID_KEY)

    async def authorize(self, key: str | None) -> Caller:
        """The caller of ``key``, checked, and its request counted against its key's rate:
        Unauthorized (401) for a missing or unknown key, RateLimited (429) past the rate."""
        if not self._keys_required:
            return ANONYMOUS
        hashed = self._hashed(key)
        if hashed in self._configured:
            return Caller(hashed)
        found = await self._managed(hashed)
        if found is None:
            raise Unauthorized(INVALID_KEY)
        if found.requests_per_minute is not None and self.keys is not None:
            store = self.keys
            wait = await self._trusted_call(lambda: store.take_request(found, self.clock()), hashed)
            if wait is not None:
                raise RateLimited(
                    f"this key may make {found.requests_per_minute} requests a minute: try again in {wait:.1f} s",
                    retry_after_s=max(1, round(wait + 0.5)),
                )
        return Caller(hashed, found)

    def _hashed(self, key: str | None) -> str:
        if not key:
            raise Unauthorized(KEY_REQUIRED)
        return digest(key)

    async def _managed(self, hashed: str) -> ApiKey | None:
        """The managed key of digest ``hashed``, read again once ``KEY_RECHECK_S`` has passed."""
        read = self._read.get(hashed)
        if read is not None and time.monotonic() - read.at < KEY_RECHECK_S:
            return read.key
        if self.keys is None:
            return None
        store = self.keys
        try:
            found = await self._call(lambda: store.find(hashed))
        except DatabaseUnavailable:
            if read is not None and time.monotonic() - read.at < self.settings.key_trust_s:
                return read.key
            raise
        if found is None:
            self._read.pop(hashed, None)
        else:
            self._read[hashed] = _Read(found, time.monotonic())
        return found

    # -- characters ---------------------------------------------------------------------------

    @asynccontextmanager
    async def metered(self, caller: Caller, characters: int) -> AsyncIterator[None]:
        """Count ``characters`` for ``caller`` around a translation: QuotaExceeded (nothing
        counted) if they would take its key past its month's quota; taken back if the block raises."""
        if caller.key is None and self.keys is not None:  # no quota: counted in the process first
            self._count_later(caller.owner, characters)
            try:
                yield
            except BaseException:
                self._count_later(caller.owner, -characters)
                raise
            return
        charge = await self._charge(caller, characters)
        try:
            yield
        except BaseException:
            if charge is not None and self.keys is not None:
                store = self.keys
                try:
                    await self._call(lambda: store.refund(charge))
                except DatabaseUnavailable:
                    log.warning("characters of a failed request could not be taken back: %s", charge)
            raise

    async def _charge(self, caller: Caller, characters: int) -> Charge | None:
        """Count a managed key's characters within its quota, in the database at once."""
        if self.keys is None or caller.key is None or characters == 0:
            return None
        store, limit = self.keys, caller.key.characters_per_month
        counted = await self._trusted_call(
            lambda: store.charge(caller.owner, characters, limit=limit, now=self.clock()), caller.owner
        )
        if isinstance(counted, OverQuota):
            raise _over_quota(counted, characters, self.clock())
        return counted

    def _count_later(self, owner: str, characters: int) -> None:
        self._uncounted[owner] += characters
        if self._counting is None or self._counting.done():
            self._counting = asyncio.get_running_loop().create_task(self._count_soon())

    async def _count_soon(self) -> None:
        await asyncio.sleep(COUNT_EVERY_S)
        await self.count()

    async def count(self) -> None:
        """Write the characters added up in the process; kept for the next time if the database
        cannot be used."""
        counts = {owner: n for owner, n in self._uncounted.items() if n}
        self._uncounted.clear()
        if not counts or self.keys is None:
            return
        store, now = self.keys, self.clock()
        try:
            await self._call(lambda: store.add(counts, now))
        except DatabaseUnavailable:
            for owner, n in counts.items():
                self._count_later(owner, n)

    async def usage(self, caller: Caller) -> tuple[int, int | None]:
        """The characters counted for ``caller`` this month, and its key's monthly limit."""
        limit = caller.key.characters_per_month if caller.key else None
        if self.keys is None:
            return 0, limit
        if self._uncounted[caller.owner]:
            await self.count()
        store = self.keys
        used = await self._call(lambda: store.used(caller.owner, self.clock()))
        return used, limit

    # -- the database -------------------------------------------------------------------------

    async def _call(self, call: Callable[[], T]) -> T:
        """``call`` on the store's threads, the schema made first; DatabaseUnavailable if the
        database cannot be used, at once for ``RETRY_S`` after it was found so."""
        if self._problem is not None and time.monotonic() < self._retry_at:
            raise DatabaseUnavailable(self._problem)
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._threads, self._migrated_call, call)
        except DatabaseUnavailable as e:
            self._retry_at = time.monotonic() + RETRY_S
            self._note(e.reason)
            raise
        self._note(None)
        return result

    async def _trusted_call(self, call: Callable[[], T], trusted: str) -> T | None:
        """``_call``, or None (the call not made) while the database cannot be used if ``trusted``
        is the digest of a managed key read from it within MT_KEY_TRUST_S."""
        try:
            return await self._call(call)
        except DatabaseUnavailable:
            read = self._read.get(trusted)
            if read is not None and time.monotonic() - read.at < self.settings.key_trust_s:
                return None
            raise

    def _migrated_call(self, call: Callable[[], T]) -> T:
        if not self._migrated and self.keys is not None:
            migrated(self.keys.db)
            self._migrated = True
        return call()

    async def unready(self) -> str | None:
        """Why the service is not ready for lack of its database: until the database has been
        reached once (its schema made), why it cannot be; None after. Once it has been, an outage
        is answered route by route (503 where state is needed), not by taking every replica out of
        service: translations that need none go on. An open service on SQLite (no MT_DATABASE_URL,
        no MT_REQUIRE_KEYS) is ready without it: it only counts characters there."""
        if self._migrated or self.keys is None:
            return None
        try:
            await self._call(lambda: None)
        except DatabaseUnavailable as e:
            return e.reason if self.settings.database_url or self.settings.require_keys else None
        return None

    def _note(self, problem: str | None) -> None:
        """Log a change of the database's state, once."""
        if problem == self._problem or (problem is not None and self._problem is not None):
            return
        if problem is None:
            log.warning("the state database can be used again")
        else:
            log.error("the state database cannot be used: %s", problem)
        self._problem = problem

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        if self.keys is not None:
            self.keys.db.close()


def _over_quota(over: OverQuota, characters: int, now: float) -> QuotaExceeded:
    return QuotaExceeded(
        f"this key may translate {over.limit:,} characters a month and has {over.limit - over.used:,} left: "
        f"{characters:,} more would pass it",
        headers={"Retry-After": str(round(seconds_to_next_month(now)))},
        details={"limit": over.limit, "used": over.used, "requested": characters},
    )
