"""What every route module shares: the runtime dependency, the API key, the request's parameters
(one reader of forms and JSON bodies for the LibreTranslate and DeepL routes), the translation job,
disconnect handling, the documented errors."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar
from urllib.parse import parse_qsl

from fastapi import Depends, Request
from fastapi.security.utils import get_authorization_scheme_param
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException

from service.access import Caller
from service.errors import ClientDisconnected, InvalidRequest, PayloadTooLarge, RequestTimeout, ServiceError
from service.runtime import Runtime
from service.schemas import ErrorResponse, TranslateRequest, embedded_schema
from service.translation import TranslationJob

T = TypeVar("T")


# What each error status means, and the headers it comes with, in the OpenAPI document.
_ERRORS: dict[int, dict[str, Any]] = {
    400: {"description": "Unsupported language or language pair"},
    401: {
        "description": "Missing or invalid API key",
        "headers": {"WWW-Authenticate": {"schema": {"type": "string", "const": "Bearer"}}},
    },
    403: {
        "description": "The key already keeps the most glossaries it may (glossary_limit), or the request would "
        "take it past its characters for the month (quota_exceeded: nothing counted)"
    },
    404: {"description": "No such file, or it has expired"},
    413: {"description": "Too many texts, characters or bytes"},
    415: {"description": "A file of a type that cannot be translated"},
    422: {"description": "Invalid request, or malformed HTML or XML (malformed_markup)"},
    429: {
        "description": "Overloaded: too many texts queued, or file uploads being received (MT_MAX_UPLOADS); or the "
        "key's requests a minute are spent (rate_limited)",
        "headers": {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer", "minimum": 0}}},
    },
    503: {"description": "Starting, shutting down, or the model cannot be loaded"},
    504: {"description": "The deadline passed"},
    507: {"description": "No space left on the server's disk (insufficient_storage); nothing was kept"},
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route: these statuses answer with the service's error body."""
    return {status: {"model": ErrorResponse, **_ERRORS[status]} for status in statuses}


def json_error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``error_responses`` of a route whose answer is not JSON (an event stream): FastAPI would list
    a ``model`` under the route's own media type, so the JSON schema is given in full."""
    content = {"application/json": {"schema": embedded_schema(ErrorResponse)}}
    return {status: {"content": content, **_ERRORS[status]} for status in statuses}


# A coroutine because FastAPI runs plain-function dependencies in its thread pool: a thread hop
# per dependency per request, on the path that carries the load.
async def get_runtime(request: Request) -> Runtime:
    """FastAPI dependency (also awaited directly by the translation routes): the app's runtime."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def form_error(exc: HTTPException) -> ServiceError:
    """What Starlette's refusal to parse a form body means: the body limit's 413 or the body's
    timeout (408) while the body streamed in, or a malformed form."""
    for error in (PayloadTooLarge, RequestTimeout):
        if exc.status_code == error.status:
            return error(str(exc.detail))
    return InvalidRequest(f"malformed form body: {exc.detail}")


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# Where a JSON text can give a string a lone surrogate: escaped, or UTF-8 bytes of one.
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
MAX_URLENCODED_FIELDS = 1000  # as Starlette's form parser


async def read_form(request: Request, content_type: str) -> FormData:
    """The body's form (``content_type``, one of ``FORM_TYPES``). A URL-encoded body is read as
    UTF-8, its bytes sent as they are and its %-escapes alike, as Flask (LibreTranslate) and DeepL
    read it: Starlette reads bytes sent as they are as Latin-1, so that ``curl -d 'q=Straße'``,
    which sends them so, would ask to translate "ß" as two other characters. An invalid byte reads
    as U+FFFD."""
    try:
        if content_type != "application/x-www-form-urlencoded":
            return await request.form()
        body = (await request.body()).decode("utf-8", "replace")
    except HTTPException as exc:
        raise form_error(exc) from None
    try:
        return FormData(parse_qsl(body, keep_blank_values=True, max_num_fields=MAX_URLENCODED_FIELDS))
    except ValueError:
        raise InvalidRequest(
            f"malformed form body: Too many fields. Maximum number of fields is {MAX_URLENCODED_FIELDS}."
        ) from None


@dataclass(frozen=True)
class Parameters:
    """A request's parameters as its client sent them: its query's fields, and its body's, a form's
    (its text fields, in order: files are the upload routes' to read) or a JSON object. The APIs
    merge them their own ways (``grouped``)."""

    query: list[tuple[str, str]]
    form: list[tuple[str, str]] = field(default_factory=list)
    json: dict[str, Any] | None = None

    @staticmethod
    def grouped(fields: list[tuple[str, str]]) -> dict[str, list[str]]:
        """Each name's values, in order: a repeated field (``q=a&q=b``) has several."""
        values: dict[str, list[str]] = {}
        for name, value in fields:
            values.setdefault(name, []).append(value)
        return values


async def read_parameters(
    request: Request, *, malformed_json: Callable[[str], ServiceError], blank_json: bool
) -> Parameters:
    """The request's parameters (``Parameters``): a form body (``read_form``), a JSON body, or none.
    A JSON body that is not a JSON object is refused with ``malformed_json`` of what is wrong with
    it. A blank body is no body, but one sent as JSON where ``blank_json`` is false (LibreTranslate,
    whose Flask refuses it); another body than a form or JSON is refused."""
    query = list(request.query_params.multi_items())
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in FORM_TYPES:
        form = await read_form(request, content_type)
        try:
            return Parameters(query, form=[(name, v) for name, v in form.multi_items() if isinstance(v, str)])
        finally:
            await form.close()
    body = await request.body()
    sent_json = content_type == "application/json" or content_type.endswith("+json")
    if not body.strip() and (blank_json or not sent_json):
        return Parameters(query)
    if not sent_json:
        raise InvalidRequest(f"unsupported content type {content_type or 'none'!r}: send JSON or a form")
    try:
        parsed = parse_json(body)
    except ValueError as e:
        raise malformed_json(f"malformed JSON: {e}") from None
    except RecursionError:
        raise malformed_json("malformed JSON: nested too deeply") from None
    if not isinstance(parsed, dict):
        raise malformed_json("the JSON body must be an object")
    return Parameters(query, json=parsed)


def parse_json(body: bytes) -> Any:
    """A JSON body, parsed as Flask (LibreTranslate) and DeepL parse it (a byte order mark, UTF-16
    and UTF-32 detected); a ``ValueError`` unless it is JSON of valid Unicode (a ``RecursionError``
    for arrays or objects nested thousands deep). JSON may escape a lone surrogate ("\\ud800"),
    which would fail whatever encodes it later (an error message echoing it, the response) as a
    500; an integer of over 4,300 digits is Python's ``ValueError`` already."""
    text = body.decode(json.detect_encoding(body), "surrogatepass")  # as json.loads decodes bytes
    parsed = json.loads(text)
    if not _SURROGATE.search(text):  # most bodies: no string to look through
        return parsed
    pending = [parsed]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            _check_unicode(value)
        elif isinstance(value, dict):
            pending += [*value, *value.values()]
        elif isinstance(value, list):
            pending += value
    return parsed


def _check_unicode(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"a string holds a lone surrogate at position {e.start}: no Unicode text") from None


def bearer_key(request: Request) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header, if any. Read directly rather than
    through a FastAPI security dependency, whose machinery runs on every request."""
    scheme, key = get_authorization_scheme_param(request.headers.get("authorization"))
    return key if scheme.lower() == "bearer" and key else None


async def authorized(request: Request, key: str | None) -> Caller:
    """The request's caller, its key checked (``service.access``): once a request, however many of
    its parts ask (a translation and the glossary it names), so that it counts once against its
    key's rate."""
    caller: Caller | None = getattr(request.state, "caller", None)
    if caller is None:
        caller = await (await get_runtime(request)).access.authorize(key)
        request.state.caller = caller
    return caller


def translation_job(body: TranslateRequest, request: Request) -> TranslationJob:
    """What a /v1 translation body asks for, with the request's API key."""
    return TranslationJob(
        texts=body.texts,
        source_lang=body.source_lang,
        target_lang=body.target_lang,
        options=body.options(),
        api_key=bearer_key(request),
        timeout_s=body.timeout_s,
    )


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await ``work``, cancelling it (which drops its queued texts) if the client disconnects.
    ``work`` runs in the request's own task, which a watcher cancels: a task of its own and a wait
    for either (with ``Runtime._route``'s gathering task) cost a twentieth of the HTTP process's
    CPU at 64 clients (benchmarks/RESULTS.md, section 32)."""
    request_task = asyncio.current_task()
    assert request_task is not None
    waiting, disconnected = True, False

    def hang_up(_: asyncio.Future[None]) -> None:
        nonlocal disconnected
        if waiting:  # not once the work is done: a done callback may run after it, when the route has moved on
            disconnected = True
            request_task.cancel()

    watcher = asyncio.ensure_future(_disconnected(request))
    watcher.add_done_callback(hang_up)
    try:
        return await work
    except asyncio.CancelledError:
        if not disconnected:  # cancelled from outside (shutdown): as it was asked
            raise
        request_task.uncancel()  # the cancellation was this function's, said as ClientDisconnected
        raise ClientDisconnected("client disconnected before the translation finished") from None
    finally:
        waiting = False
        watcher.remove_done_callback(hang_up)
        watcher.cancel()


async def _disconnected(request: Request) -> None:
    # The body has been read, so the next ASGI message is the disconnect (or the end of the response).
    while (await request.receive())["type"] != "http.disconnect":
        pass
