"""The service's error taxonomy, and the one place that decides what an error is as an HTTP answer.

Every error response has the body ``{"error": {"type": ..., "message": ...}}``, plus machine-readable
fields where an error has them (``supported_pairs``, ``detected_language``, ``text_index``,
``line`` and ``column``). The ``type`` is a
short stable identifier that clients can branch on and that doubles as the ``type`` label of the
``mt_errors_total`` metric, so it must come from the bounded set in ``ERROR_TYPES``.

The APIs this service stands in for answer the same errors in their own shapes and with their own
statuses: each one's route modules render them from what ``describe`` makes of an error; this
module knows none of those APIs.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from engine.picklable import Picklable

log = logging.getLogger(__name__)


class ServiceError(Picklable, Exception):
    """Base class: an expected failure with an HTTP status and a stable error type."""

    status: int = 500
    type: str = "internal_error"

    def __init__(
        self, message: str, *, headers: dict[str, str] | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}
        self.details = details or {}


class InvalidRequest(ServiceError):
    status, type = 422, "invalid_request"


class MalformedMarkup(InvalidRequest):
    """HTML or XML that cannot be translated with its tags in place; details say where."""

    type = "malformed_markup"


class InvalidGlossary(InvalidRequest):
    """Glossary entries that cannot make a glossary: an empty or duplicate term, too many entries."""

    type = "invalid_glossary"


class PayloadTooLarge(ServiceError):
    status, type = 413, "payload_too_large"

    @classmethod
    def over(cls, message: str, setting: str, limit: int, requested: int) -> PayloadTooLarge:
        """Over the limit a setting sets: ``message``, then the setting; the details name all three."""
        return cls(f"{message} ({setting})", details={"setting": setting, "limit": limit, "requested": requested})


class UnsupportedMediaType(ServiceError):
    """A file of a type that cannot be translated."""

    status, type = 415, "unsupported_media_type"


class NotFound(ServiceError):
    status, type = 404, "not_found"


class UnsupportedLanguage(ServiceError):
    status, type = 400, "unsupported_language"


class GlossaryMismatch(ServiceError):
    """A translation that names other languages than its glossary is for."""

    status, type = 400, "glossary_mismatch"


class Unauthorized(ServiceError):
    status, type = 401, "unauthorized"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


class Forbidden(ServiceError):
    """Refused whoever asks: a feature of an API the service stands in for that it does not offer."""

    status, type = 403, "forbidden"


class GlossaryLimit(ServiceError):
    """A key already keeps the most glossaries it may (``service.glossaries.MAX_GLOSSARIES``)."""

    status, type = 403, "glossary_limit"


class Overloaded(ServiceError):
    status, type = 429, "overloaded"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after_s)})
        self.retry_after_s = retry_after_s


class RateLimited(Overloaded):
    """A managed key past its requests per minute (``service.keys``): ``Retry-After`` says when."""

    type = "rate_limited"


class QuotaExceeded(ServiceError):
    """A request that would take a managed key past its characters for the month: refused whole,
    nothing counted."""

    status, type = 403, "quota_exceeded"


class DeadlineExceeded(ServiceError):
    status, type = 504, "timeout"


class Unavailable(ServiceError):
    """Not ready yet (model loading) or shutting down: the client should go to another replica."""

    status, type = 503, "unavailable"


class DatabaseUnavailable(Unavailable):
    """The state database (``service.database``) cannot be reached, or did not answer in time. The
    client is told only that; ``reason`` (where it is, what the driver said) is for the logs and
    readiness."""

    type = "database_unavailable"

    def __init__(self, reason: str) -> None:
        super().__init__("the service's database cannot be reached just now: try again shortly")
        self.reason = reason


class RequestTimeout(ServiceError):
    """The client left the request's body unfinished, sending nothing for MT_IDLE_TIMEOUT_S, sending
    it slower than MT_MIN_BODY_RATE, or an upload past MT_UPLOAD_TIMEOUT_S."""

    status, type = 408, "request_timeout"


class ClientDisconnected(ServiceError):
    """The client went away; the status is nginx's 499 and is only ever seen in metrics and logs."""

    status, type = 499, "client_disconnected"


class InsufficientStorage(ServiceError):
    """A disk the service writes to is full (uploads, translated files, glossaries): nothing of
    the request was kept."""

    status, type = 507, "insufficient_storage"


class InternalError(ServiceError):
    """A bug or an engine failure: never the client's fault, always logged with its traceback."""


# Statuses that Starlette/FastAPI raise themselves (routing, body parsing), with our type names.
_HTTP_STATUS_TYPES = {
    400: "bad_request",
    401: Unauthorized.type,
    404: "not_found",
    405: "method_not_allowed",
    408: RequestTimeout.type,
    413: PayloadTooLarge.type,
    422: InvalidRequest.type,
}

_SERVICE_ERRORS: tuple[type[ServiceError], ...] = (
    InvalidRequest,
    MalformedMarkup,
    InvalidGlossary,
    PayloadTooLarge,
    UnsupportedMediaType,
    NotFound,
    UnsupportedLanguage,
    GlossaryMismatch,
    Unauthorized,
    Forbidden,
    Overloaded,
    RateLimited,
    QuotaExceeded,
    DeadlineExceeded,
    Unavailable,
    DatabaseUnavailable,
    RequestTimeout,
    ClientDisconnected,
    InsufficientStorage,
    InternalError,
)
# Every value the ``type`` field (and metric label) can take.
ERROR_TYPES: tuple[str, ...] = tuple(
    dict.fromkeys([cls.type for cls in _SERVICE_ERRORS] + [*_HTTP_STATUS_TYPES.values(), "http_error"])
)


def error_body(error_type: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"type": error_type, "message": message, **(details or {})}}


@dataclass(frozen=True)
class Described:
    """What an exception means as an HTTP error, whatever shape its body takes."""

    status: int
    type: str
    message: str
    headers: dict[str, str]
    details: dict[str, Any] | None


def describe(exc: Exception) -> Described:
    """Map any exception to its status, type and message. Unknown exceptions become a 500 and are logged."""
    if _gone_while_sending(exc):
        exc = ClientDisconnected("client disconnected while sending the request body")
    elif storage_full(exc):
        log.warning("temporary storage full: %s", exc)
        exc = InsufficientStorage(
            "the server has no space left to hold the file (uploads and translated files wait in its temporary "
            "directory): try again later"
        )
    if isinstance(exc, ServiceError):
        return Described(exc.status, exc.type, exc.message, exc.headers, exc.details)
    if isinstance(exc, RequestValidationError):
        return Described(422, InvalidRequest.type, describe_validation(exc.errors()), {}, None)
    if isinstance(exc, StarletteHTTPException):
        status = exc.status_code
        message = str(exc.detail) if exc.detail else HTTPStatus(status).phrase
        return Described(status, _HTTP_STATUS_TYPES.get(status, "http_error"), message, dict(exc.headers or {}), None)
    log.error("unhandled error", exc_info=exc)
    return Described(500, InternalError.type, "internal server error", {}, None)


def error_response(exc: Exception) -> tuple[JSONResponse, str]:
    """Map any exception to (response, error type). Unknown exceptions become a 500 and are logged."""
    e = describe(exc)
    return JSONResponse(error_body(e.type, e.message, e.details), status_code=e.status, headers=e.headers), e.type


def _gone_while_sending(exc: Exception) -> bool:
    """Starlette's ``ClientDisconnect``: the client closed the connection before its body had
    arrived. FastAPI re-raises it as a 400 for the routes whose body it reads itself."""
    return isinstance(exc, ClientDisconnect) or (
        isinstance(exc, StarletteHTTPException) and isinstance(exc.__cause__, ClientDisconnect)
    )


def storage_full(exc: Exception) -> bool:
    """A write that failed because the disk (ENOSPC) or the user's quota (EDQUOT) is full, or
    SQLite's database with it (SQLITE_FULL)."""
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def describe_validation(errors: Any) -> str:
    """Pydantic/FastAPI validation errors as one human-readable line: ``text: Field required; ...``."""
    parts = []
    for err in errors:
        if err.get("type") == "json_invalid":  # pydantic-core's parser: the error says where
            parts.append(f"malformed JSON: {err.get('ctx', {}).get('error', 'invalid')}")
            continue
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid').removeprefix('Value error, ')}")
    return "; ".join(parts) or "invalid request"


Render = Callable[[Exception], tuple[JSONResponse, str]]  # an error as an API answers it, and its type


def install_error_handlers(
    app: FastAPI,
    on_error: Callable[[str], None],
    *,
    dialects: Sequence[tuple[Callable[[Request], bool], Render]] = (),
) -> None:
    """Route every exception FastAPI can surface through ``error_response``, or through the ``Render``
    of the first of ``dialects`` whose predicate picks the request (by its route: an API's own
    shape); ``on_error`` gets the type."""

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        render = next((render for picks, render in dialects if picks(request)), error_response)
        response, error_type = render(exc)
        on_error(error_type)
        return response

    # ClientDisconnect and OSError (a full disk) by name: an exception left to the ``Exception``
    # handler is answered with a 500 and then re-raised to the server, which logs it as a crash.
    exc_classes = (ServiceError, RequestValidationError, StarletteHTTPException, ClientDisconnect, OSError, Exception)
    for exc_class in exc_classes:
        app.add_exception_handler(exc_class, handle)
