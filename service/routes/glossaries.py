"""``/v1/glossaries``: the caller's glossaries (``service.glossaries``), and what every translation
route shares to translate with one: whose glossaries a key sees, the store, a request's glossary.

A glossary belongs to the API key that made it (a digest of it; everyone's when the service has no
keys) and is for one language pair the served models translate. Entries that cannot make a glossary
are a 422 ``invalid_glossary``; an unknown id, or another key's, a 404.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.types import Receive, Scope, Send

from engine import languages
from service.errors import (
    GlossaryLimit,
    InsufficientStorage,
    InternalError,
    InvalidGlossary,
    NotFound,
    Overloaded,
    Unavailable,
    UnsupportedLanguage,
    storage_full,
)
from service.glossaries import (
    GlossaryStore,
    InvalidEntries,
    StoreReplaced,
    TooManyGlossaries,
    checked,
    damaged,
    parse_entries,
    quoted_id,
)
from service.glossary_schemas import (
    GlossaryCreate,
    GlossaryEntriesBody,
    GlossaryList,
    GlossaryOut,
    GlossaryPatch,
    GlossaryWithEntries,
)
from service.keys import digest
from service.routes.common import authorized, bearer_key, error_responses, get_runtime
from service.runtime import Runtime
from service.schemas import BEARER_AUTH, GlossaryEntry, InlineGlossary, json_body, validated
from service.translation import JobGlossary

log = logging.getLogger(__name__)
T = TypeVar("T")


class _SharedPathRoute(APIRoute):
    """A route whose 405 names every method of its path: a glossary's path has several routes, and
    Starlette's 405 names only the methods of the first."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.methods and scope["method"] not in self.methods:
            routes = router.routes  # every route of a glossary's paths is this module's
            methods = {m for r in routes if isinstance(r, APIRoute) and r.path == self.path for m in r.methods}
            raise HTTPException(405, headers={"Allow": ", ".join(sorted(methods))})
        await super().handle(scope, receive, send)


router = APIRouter(tags=["glossaries"], route_class=_SharedPathRoute)

# The 404 of a route that names a glossary.
NOT_FOUND = "No such glossary"
NO_GLOSSARY: dict[int | str, dict[str, Any]] = {404: {**error_responses(404)[404], "description": NOT_FOUND}}
_ERRORS = {**error_responses(401, 503), **NO_GLOSSARY}
_WRITE_ERRORS = {**error_responses(401, 413, 422, 429, 503, 507), **NO_GLOSSARY}


def owner(runtime: Runtime, key: str | None) -> str:
    """Whose glossaries: a digest of the key, or everyone's where keys are not required."""
    return digest(key) if runtime.settings.keys_required and key else ""


def glossary_store(request: Request) -> GlossaryStore:
    store: GlossaryStore = request.app.state.glossaries
    return store


@contextmanager
def entries_checked() -> Iterator[None]:
    """Entries refused (``InvalidEntries``) as the service's InvalidGlossary (422), with the entry
    of the text that is wrong, where one is, for a client to point at."""
    try:
        yield
    except InvalidEntries as e:
        raise InvalidGlossary(str(e), details=None if e.entry is None else {"entry": e.entry}) from None


class _StoreThreads:
    """The glossary store's threads, apart from asyncio's default pool (which other work and, before,
    the readiness check shared): reads (a translation's glossary, a listing) on a few, writes on
    one, since SQLite writes one at a time anyway. At most ``MAX_PENDING_WRITES`` writes wait; one
    more is refused (429) at once: 32 clients each replacing 10,000 entries in a loop queued every
    write for seconds on the database's lock, and everyone's glossary translations behind them."""

    def __init__(self) -> None:
        self.reads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="mt-glossary-read")
        self.writes = ThreadPoolExecutor(1, thread_name_prefix="mt-glossary-write")
        self.pending_writes = 0

    async def run(self, call: Callable[[], T], *, write: bool) -> T:
        loop = asyncio.get_running_loop()
        if not write:
            return await loop.run_in_executor(self.reads, call)
        if self.pending_writes >= MAX_PENDING_WRITES:
            raise Overloaded(
                f"{MAX_PENDING_WRITES} glossary changes are waiting to be stored: try again shortly",
                retry_after_s=WRITE_RETRY_AFTER_S,
            )
        self.pending_writes += 1
        try:
            return await loop.run_in_executor(self.writes, call)
        finally:
            self.pending_writes -= 1


READ_THREADS = 4
MAX_PENDING_WRITES = 8
WRITE_RETRY_AFTER_S = 1
_THREADS = _StoreThreads()


async def stored(call: Callable[[], T], *, write: bool = False) -> T:
    """A glossary store call, on the store's threads (``_StoreThreads``; ``write``: one that
    changes the store): entries it refuses are InvalidGlossary (422); one glossary too many for the
    key GlossaryLimit (403); a full disk InsufficientStorage (507: the write's transaction left
    nothing); a damaged store, or one replaced during the call, Unavailable (503); its other failures
    are the server's (500), logged."""
    try:
        with entries_checked():
            return await _THREADS.run(call, write=write)
    except TooManyGlossaries as e:
        raise GlossaryLimit(str(e)) from None
    except StoreReplaced as e:
        raise Unavailable(f"{e}: try again") from None
    except (sqlite3.Error, OSError) as e:
        if storage_full(e):
            log.warning("glossary store full: %s", e)
            raise InsufficientStorage(
                "no space left to store the glossary (MT_DATA_DIR): nothing was changed"
            ) from None
        if isinstance(e, sqlite3.Error) and damaged(e):
            log.error("the glossary store (MT_DATA_DIR) is damaged: %s", e)
            raise Unavailable(f"the glossary store (MT_DATA_DIR) is damaged and cannot be used: {e}") from None
        log.error("glossary store failed", exc_info=e)
        raise InternalError(f"the glossary store (MT_DATA_DIR) cannot be used: {e}") from None


async def stored_glossary(request: Request, key: str | None, glossary_id: str) -> JobGlossary | None:
    """The key's glossary ``glossary_id``, to translate with; None if it has none of that id."""
    runtime = await get_runtime(request)
    store, whose = glossary_store(request), owner(runtime, key)
    return await stored(lambda: job_glossary(store, whose, glossary_id))


def job_glossary(store: GlossaryStore, whose: str, glossary_id: str) -> JobGlossary | None:
    """``whose`` glossary ``glossary_id``, to translate with; None if it has none of that id."""
    # Checked again by the store: one stored before duplicates were judged as they match may have two.
    found = store.glossary(whose, glossary_id)
    if found is None:
        return None
    info, glossary = found
    return JobGlossary(glossary, info.source_lang, info.target_lang)


async def request_glossary(request: Request, asked: str | InlineGlossary | None) -> JobGlossary | None:
    """The glossary a /v1 translation asks for: one of the caller's, by id (NotFound if it has none
    of that id), or its own entries."""
    if asked is None:
        return None
    if isinstance(asked, InlineGlossary):
        with entries_checked():
            return JobGlossary(checked([entry.term() for entry in asked.entries]))
    key = bearer_key(request)
    await authorized(request, key)  # before whose glossaries are known
    glossary = await stored_glossary(request, key, asked)
    if glossary is None:
        raise NotFound(f"no glossary {asked!r}")
    return glossary


async def _caller(request: Request) -> tuple[str, GlossaryStore, Runtime]:
    """The caller's key, checked, as the owner of glossaries; the store; the runtime."""
    runtime = await get_runtime(request)
    caller = await authorized(request, bearer_key(request))
    return caller.owner, glossary_store(request), runtime


def _pair(runtime: Runtime, source: str, target: str) -> tuple[str, str]:
    """The served pair a glossary names, by the router's codes; UnsupportedLanguage (400) otherwise."""
    _, served = runtime.serving()
    try:
        pair = served.code(source, "source"), served.code(target, "target")
    except languages.UnsupportedLanguage as e:
        raise UnsupportedLanguage(str(e)) from None
    if pair not in served.pairs():
        raise UnsupportedLanguage(f"no model translates {pair[0]!r} into {pair[1]!r}")
    return pair


@router.post(
    "/v1/glossaries",
    status_code=201,
    response_model=GlossaryOut,
    responses=error_responses(400, 401, 403, 413, 422, 429, 503, 507),
    openapi_extra={**json_body(GlossaryCreate), **BEARER_AUTH},
)
async def create_glossary(request: Request) -> GlossaryOut:
    """Create a glossary for a served language pair, from entries or from DeepL's TSV or CSV."""
    whose, store, runtime = await _caller(request)
    body = validated(GlossaryCreate, await request.body())
    source, target = _pair(runtime, body.source_lang, body.target_lang)
    if body.entries_text is not None:
        with entries_checked():
            _, served = runtime.serving()
            terms = parse_entries(body.entries_text, body.entries_format, (source, target), served)
    else:
        terms = [entry.term() for entry in body.entries or []]
    return GlossaryOut.of(await stored(lambda: store.create(whose, body.name, source, target, terms), write=True))


@router.get(
    "/v1/glossaries", response_model=GlossaryList, responses=error_responses(401, 503), openapi_extra=BEARER_AUTH
)
async def list_glossaries(request: Request) -> GlossaryList:
    """The caller's glossaries, oldest first."""
    whose, store, _ = await _caller(request)
    return GlossaryList(glossaries=[GlossaryOut.of(g) for g in await stored(lambda: store.list(whose))])


@router.get(
    "/v1/glossaries/{glossary_id}", response_model=GlossaryWithEntries, responses=_ERRORS, openapi_extra=BEARER_AUTH
)
async def get_glossary(request: Request, glossary_id: str) -> GlossaryWithEntries:
    """A glossary with its entries."""
    whose, store, _ = await _caller(request)
    found = await stored(lambda: store.with_entries(whose, glossary_id))
    if found is None:
        raise NotFound(f"no glossary {quoted_id(glossary_id)}")
    info, terms = found
    return GlossaryWithEntries.of(info, entries=[GlossaryEntry.of(t) for t in terms])


@router.patch(
    "/v1/glossaries/{glossary_id}",
    response_model=GlossaryOut,
    responses=_WRITE_ERRORS,
    openapi_extra={**json_body(GlossaryPatch), **BEARER_AUTH},
)
async def patch_glossary(request: Request, glossary_id: str) -> GlossaryOut:
    """Rename a glossary, add or replace entries (by their source term), remove entries: all or nothing."""
    whose, store, _ = await _caller(request)
    body = validated(GlossaryPatch, await request.body())
    changes = [entry.term() for entry in body.entries or []]
    return await _updated(store, whose, glossary_id, name=body.name, changes=changes, remove=body.remove or [])


@router.put(
    "/v1/glossaries/{glossary_id}/entries",
    response_model=GlossaryOut,
    responses=_WRITE_ERRORS,
    openapi_extra={**json_body(GlossaryEntriesBody), **BEARER_AUTH},
)
async def replace_entries(request: Request, glossary_id: str) -> GlossaryOut:
    """Replace all of a glossary's entries."""
    whose, store, _ = await _caller(request)
    body = validated(GlossaryEntriesBody, await request.body())
    return await _updated(store, whose, glossary_id, entries=[entry.term() for entry in body.entries])


async def _updated(store: GlossaryStore, whose: str, glossary_id: str, **changes: Any) -> GlossaryOut:
    """``GlossaryStore.update`` with ``changes``; NotFound if there is no such glossary."""
    updated = await stored(lambda: store.update(whose, glossary_id, **changes), write=True)
    if updated is None:
        raise NotFound(f"no glossary {quoted_id(glossary_id)}")
    return GlossaryOut.of(updated)


@router.delete(
    "/v1/glossaries/{glossary_id}",
    status_code=204,
    response_class=Response,
    responses={**_ERRORS, **error_responses(429)},
    openapi_extra=BEARER_AUTH,
)
async def delete_glossary(request: Request, glossary_id: str) -> Response:
    """Delete a glossary and its entries."""
    whose, store, _ = await _caller(request)
    if not await stored(lambda: store.delete(whose, glossary_id), write=True):
        raise NotFound(f"no glossary {quoted_id(glossary_id)}")
    return Response(status_code=204)
