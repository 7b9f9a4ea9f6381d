"""LibreTranslate's errors: ``{"error": "<message>"}`` with its statuses, on every route tagged ``TAG``
(``routes/libretranslate.py``'s and ``routes/files.py``'s LibreTranslate routes) and in the OpenAPI
document of those routes.

Every invalid request is a 400 there, limits of the text included (a body over the byte limit stays
413, as Flask's, answered before any route in the service's shape), and a wrong key a 403. Its
messages say "Invalid request: ..." of a request it refuses as invalid, but for the errors raised
in its own words (``LibreTranslateInvalid``, ``InvalidApiKey``, ``TextLimit``), and "Slowdown: ..."
of a 429.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from service.errors import InvalidRequest, PayloadTooLarge, ServiceError, Unauthorized, describe

TAG = "LibreTranslate compatibility"


class LibreTranslateInvalid(InvalidRequest):
    """An invalid request in LibreTranslate's words: its 400 and its message, as it is."""


class InvalidApiKey(Unauthorized):
    """A key that is not one the service knows, as LibreTranslate says it: its 403."""


class TextLimit(PayloadTooLarge):
    """Over LibreTranslate's text limit (MT_MAX_TEXTS, MT_MAX_CHARS), in its words: its 400."""


# The errors raised in LibreTranslate's words, with its status for each.
_OWN_STATUSES: dict[type[ServiceError], int] = {LibreTranslateInvalid: 400, InvalidApiKey: 403, TextLimit: 400}
# LibreTranslate's statuses for the service's other errors, where they differ: every invalid request
# is a 400 there, of a file type it cannot translate too.
STATUSES = {415: 400, 422: 400}
_INVALID = "Invalid request: "


def answers_as_libretranslate(request: Request) -> bool:
    """Whether the request's route is one of LibreTranslate's (tagged ``TAG``, files.py's too),
    whose errors LibreTranslate's clients read as ``{"error": "<message>"}``."""
    return TAG in getattr(request.scope.get("route"), "tags", ())


def libretranslate_response(exc: Exception) -> tuple[JSONResponse, str]:
    """``errors.error_response`` as LibreTranslate answers: ``{"error": "<message>"}`` with its
    status. The type (for the metric) is the same."""
    e = describe(exc)
    own = next((status for error, status in _OWN_STATUSES.items() if isinstance(exc, error)), None)
    status = own or STATUSES.get(e.status, e.status)
    message = e.message
    if e.status in (413, 415, 422) and own is None and not message.startswith(_INVALID):
        message = _INVALID + message
    elif status == 429:
        message = f"Slowdown: {message}"
    # No Bearer challenge: LibreTranslate's key is a field.
    headers = {name: value for name, value in e.headers.items() if name.lower() != "www-authenticate"}
    return JSONResponse({"error": message}, status_code=status, headers=headers), e.type


# -- the OpenAPI document -----------------------------------------------------------------------

ERROR_SCHEMA = "LibreTranslateError"
_ERROR_CONTENT = {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}}}


def libretranslate_document(document: dict[str, Any]) -> None:
    """The errors of the operations tagged ``TAG`` as they answer them: ``{"error": "<message>"}``,
    every invalid request 400, and 403 for a wrong key where a key is asked for (401: none sent).
    Only a body over the byte limit (413) is refused, before any route, in the service's own shape."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas[ERROR_SCHEMA] = {
        "type": "object",
        "properties": {"error": {"type": "string", "description": "What was wrong, in words"}},
        "required": ["error"],
        "title": ERROR_SCHEMA,
    }
    for operations in document["paths"].values():
        for operation in operations.values():
            if TAG in operation.get("tags", ()):
                operation["responses"] = _libretranslate_responses(operation["responses"])


def _libretranslate_responses(responses: dict[str, Any]) -> dict[str, Any]:
    answered: dict[str, Any] = {}
    for status, response in responses.items():
        if not status.startswith(("4", "5")):
            answered[status] = response
            continue
        if (
            status == "413"
        ):  # the body's byte limit: answered before any route (by Content-Length) in the service's shape
            own = response["content"]["application/json"]["schema"]
            description = (
                "A body over the byte limit (refused by its Content-Length before it is read: the service's shape)"
            )
            either = {"application/json": {"schema": {"anyOf": [_ERROR_CONTENT["application/json"]["schema"], own]}}}
            answered[status] = {"description": description, "content": either}
            status = "400"  # the text limits
        status = str(STATUSES.get(int(status), status))
        headers = {name: h for name, h in response.get("headers", {}).items() if name != "WWW-Authenticate"}
        merged = answered.setdefault(status, {"description": "", "content": _ERROR_CONTENT})
        merged["description"] = "; ".join(filter(None, (merged["description"], response["description"])))
        if headers:
            merged["headers"] = headers
    if "401" in answered:
        answered["401"]["description"] = "No API key"
        answered["403"] = {"description": "An API key that is not one of MT_API_KEYS", "content": _ERROR_CONTENT}
    return dict(sorted(answered.items()))
