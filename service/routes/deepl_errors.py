"""DeepL's errors: ``{"message": ...}`` with its statuses, on every route under /v2 (``DeepLRoute``).

A key refused is a 403 there, every invalid request a 400, an unknown resource a 404, and a
refusal for what a key may use (its characters for the month, its glossaries) DeepL's 456, which
its clients raise as ``QuotaExceededException``. Of an error's headers, the answer keeps those
DeepL's has: when to try again, and a 405's methods.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from service.errors import GlossaryLimit, QuotaExceeded, describe

QUOTA_EXCEEDED = 456
# The service's statuses that DeepL answers otherwise.
_STATUSES = {401: 403, 415: 400, 422: 400}
_QUOTAS = (QuotaExceeded, GlossaryLimit)
_KEPT_HEADERS = frozenset({"retry-after", "allow"})


def deepl_error(request: Request, exc: Exception) -> JSONResponse:
    """Any exception as DeepL answers it, counted in the error metric by the service's type."""
    e = describe(exc)
    request.app.state.runtime.metrics.errors.labels(e.type).inc()
    status = QUOTA_EXCEEDED if isinstance(exc, _QUOTAS) else _STATUSES.get(e.status, e.status)
    headers = {name: value for name, value in e.headers.items() if name.lower() in _KEPT_HEADERS}
    return JSONResponse({"message": e.message}, status_code=status, headers=headers)


class DeepLRoute(APIRoute):
    """A route whose errors are answered in DeepL's shape (the app's handlers answer in ours)."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # every error, as DeepL words it
                return deepl_error(request, exc)

        return handle
