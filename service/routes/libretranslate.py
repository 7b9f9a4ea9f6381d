"""LibreTranslate-compatible endpoints, so that existing LibreTranslate clients work unchanged.

``POST /translate`` takes a JSON or form body (``q``, ``source``, ``target``, ``format``,
``alternatives``, ``api_key``) and answers ``{"translatedText": ...}`` with LibreTranslate's shapes:
a string for a string ``q``, a list for a list, plus ``alternatives``, and ``detectedLanguage``
(confidence 0-100) for ``source: "auto"``. ``POST /detect``, ``GET /languages``,
``GET /frontend/settings``, ``GET /health``, ``GET /spec`` (the OpenAPI document of these routes)
and ``POST /suggest`` (refused: no suggestions here, 403) answer as LibreTranslate's do
(``POST /translate_file`` and ``GET /download_file``: ``routes/files.py``).

Errors take LibreTranslate's shape on every route tagged ``TAG``, these and files.py's:
``{"error": "<message>"}`` with its statuses (``routes.libretranslate_errors``), 400 for an invalid
request (its "Invalid request: missing q parameter", "zz is not supported", "Invalid request:
request (N) exceeds text limit (M)") and 403 for a wrong API key. The checks are the service's own
(``Runtime``); this module only says what they found in LibreTranslate's words.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine import languages
from engine.api import TranslationOptions
from engine.documents import SUPPORTED_EXTENSIONS
from engine.language_choice import as_answer
from engine.languages import LANGUAGE_NAMES
from engine.repository import Router
from service.access import Caller
from service.errors import (
    Forbidden,
    InvalidRequest,
    PayloadTooLarge,
    Unauthorized,
    UnsupportedLanguage,
    describe_validation,
)
from service.routes.common import (
    FORM_TYPES,
    Parameters,
    RuntimeDep,
    authorized,
    bearer_key,
    error_responses,
    read_parameters,
    unless_disconnected,
)
from service.routes.libretranslate_errors import TAG, InvalidApiKey, LibreTranslateInvalid, TextLimit
from service.runtime import Runtime
from service.schemas import (
    BEARER_AUTH,
    INTEGRAL,
    LANGUAGE_PAIR,
    MAX_BEAM_SIZE,
    OTHER_LANGUAGE_NAMES,
    SAME_LANGUAGE,
    SourceLanguage,
    TargetLanguage,
    TextOrTexts,
    json_body,
)
from service.settings import Settings
from service.translation import TranslationJob

M = TypeVar("M", bound=BaseModel)
router = APIRouter(tags=[TAG])

# LibreTranslate's messages (its app.py).
KEY_REQUIRED = "Please contact the server operator to get an API key"
INVALID_KEY = "Invalid API key"
INVALID_JSON = "Invalid JSON format"
SUGGESTIONS_DISABLED = "Suggestions are disabled on this server."


class LibreTranslateRequest(BaseModel):
    """Its ``POST /translate`` body, sent as JSON or as a form; unknown fields are ignored as it does."""

    model_config = ConfigDict(
        extra="ignore",
        strict=True,
        json_schema_extra={
            "examples": [{"q": "A dog runs on the grass.", "source": "en", "target": "de"}],
            LANGUAGE_PAIR: ["source", "target"],
            SAME_LANGUAGE: True,  # as LibreTranslate: a text "translated" into its own language comes back
        },
    )

    q: TextOrTexts = Field(
        description="A text or a list of texts (a repeated form field): at most MT_MAX_TEXTS, "
        "and MT_MAX_CHARS characters in all."
    )
    source: SourceLanguage = Field(description=f'"auto" = identified per text. {OTHER_LANGUAGE_NAMES}')
    target: TargetLanguage = Field(description=OTHER_LANGUAGE_NAMES)
    format: Literal["text", "html"] = Field(
        "text", description="html: each text is HTML, translated with its tags in place (as /v1/translate's)."
    )
    alternatives: Annotated[int, Field(ge=0, le=MAX_BEAM_SIZE - 1), INTEGRAL] = 0
    api_key: str | None = None

    @property
    def texts(self) -> list[str]:
        return [self.q] if isinstance(self.q, str) else self.q


class LibreLanguage(BaseModel):
    code: str
    name: str
    targets: list[str]


@router.post(
    "/translate",
    openapi_extra={**json_body(LibreTranslateRequest, *FORM_TYPES), **BEARER_AUTH},
    responses=error_responses(400, 401, 413, 422, 429, 503, 504),
)
async def translate(request: Request, runtime: RuntimeDep) -> dict[str, Any]:
    """LibreTranslate's translate: ``{"translatedText": str | list[str], "alternatives"?, "detectedLanguage"?}``."""
    fields = await _fields(request)
    key, caller = await _authorize(fields, request)
    body = _validated(LibreTranslateRequest, fields, strict=isinstance(fields, _JsonFields))
    auto = body.source.lower() == "auto"
    job = TranslationJob(
        texts=body.texts,
        source_lang=None if auto else body.source,
        target_lang=body.target,
        # The beam widens to hold the alternatives.
        options=TranslationOptions(num_hypotheses=body.alternatives + 1, format=body.format),
        api_key=key,
        keep_same_language=True,  # LibreTranslate translates every language into itself, unchanged
    )
    try:
        async with runtime.access.metered(caller, sum(map(len, job.texts))):
            done = await unless_disconnected(request, runtime.translate(job))
    except PayloadTooLarge as exc:
        raise _over_limit(exc, body.texts, runtime.settings) from None
    except UnsupportedLanguage as exc:
        raise _unsupported(exc, runtime, body.source, body.target) from None

    single = isinstance(body.q, str)
    translated = [r.text for r in done.results]
    response: dict[str, Any] = {"translatedText": translated[0] if single else translated}
    if body.alternatives:
        alternatives = [[h.text for h in r.hypotheses[1:]] for r in done.results]
        response["alternatives"] = alternatives[0] if single else alternatives
    if done.detections is not None:
        detected = [_percent(d.language, d.confidence) if d else _percent(None, 0.0) for d in done.detections]
        response["detectedLanguage"] = detected[0] if single else detected
    return response


class LibreDetectRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, json_schema_extra={"examples": [{"q": "Ein Hund läuft."}]})

    q: str = Field(min_length=1)
    api_key: str | None = None


@router.post(
    "/detect",
    openapi_extra={**json_body(LibreDetectRequest, *FORM_TYPES), **BEARER_AUTH},
    responses=error_responses(400, 401, 413, 422, 503),
)
async def detect(request: Request, runtime: RuntimeDep) -> list[dict[str, Any]]:
    """LibreTranslate's detect: ``[{"language": "fr", "confidence": 0-100}, ...]``, best first."""
    fields = await _fields(request)
    await _authorize(fields, request)
    body = _validated(LibreDetectRequest, fields, strict=isinstance(fields, _JsonFields))
    # Among MT_DETECT_LANGUAGES only (no ``language_choice.reported``): LibreTranslate's detector answers
    # among its installed languages, and its clients pass the answer on as a source language.
    found = as_answer(runtime.detect(body.q))  # a short text: as /translate would take it
    return [_percent(c.language, c.confidence) for c in found.candidates] or [_percent(None, 0.0)]


@router.get("/frontend/settings", responses=error_responses(503))
async def frontend_settings(runtime: RuntimeDep) -> dict[str, Any]:
    """LibreTranslate's front-end settings: limits, key requirement, and the default pair."""
    _, routes = runtime.serving()
    pairs = routes.pairs()
    target = pairs[0][1] if pairs else "en"
    s = runtime.settings
    return {
        "charLimit": s.max_chars,
        "frontendTimeout": 500,
        "apiKeys": s.keys_required,
        "keyRequired": s.keys_required,
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": list(SUPPORTED_EXTENSIONS),
        "language": {
            "source": {"code": "auto", "name": "Auto Detect"},
            "target": {"code": target, "name": LANGUAGE_NAMES.get(target, target)},
        },
    }


def _percent(language: str | None, confidence: float) -> dict[str, Any]:
    return {"confidence": round(100 * confidence, 1), "language": language}


@router.get("/languages", response_model=list[LibreLanguage], responses=error_responses(503))
async def languages_(runtime: RuntimeDep) -> list[LibreLanguage]:
    """The languages and, for each, the languages it can be translated into (directly or through
    a pivot)."""
    _, routes = runtime.serving()
    targets: dict[str, list[str]] = {}
    for source, target in routes.pairs():
        targets.setdefault(source, []).append(target)
        targets.setdefault(target, [])
    return [LibreLanguage(code=code, name=_name(code), targets=t) for code, t in sorted(targets.items())]


class LibreHealth(BaseModel):
    status: Literal["ok"]


@router.get("/health")
async def health() -> LibreHealth:
    """LibreTranslate's health check: the process answers (``/readyz`` says whether it can translate)."""
    return LibreHealth(status="ok")


@router.get("/spec")
async def spec(request: Request) -> dict[str, Any]:
    """The OpenAPI document of the LibreTranslate-compatible routes (LibreTranslate serves its
    Swagger document here): ``/openapi.json`` less the service's own routes."""
    document = copy.deepcopy(request.app.openapi())
    document["info"] = {**document["info"], "title": "LibreTranslate-compatible API of mt-service"}
    paths = {
        path: kept
        for path, operations in document["paths"].items()
        if (kept := {method: op for method, op in operations.items() if TAG in op.get("tags", ())})
    }
    document["paths"] = paths
    return document


@router.post("/suggest", include_in_schema=False)
async def suggest() -> None:
    """LibreTranslate's suggestions, refused as it refuses them when they are off: 403."""
    raise Forbidden(SUGGESTIONS_DISABLED)


# -- bodies -------------------------------------------------------------------------------------


class _JsonFields(dict[str, Any]):
    """A JSON object's fields (validated strictly: JSON has types, a form has only strings)."""


async def _fields(request: Request) -> dict[str, Any]:
    """The body's fields: a JSON object, or (as LibreTranslate's ``request.values``) the query's
    fields and a form's, a repeated ``q`` being a list of texts. No body at all has only the
    query's: LibreTranslate then says what is missing."""
    sent = await read_parameters(request, malformed_json=_invalid_json, blank_json=False)
    if sent.json is not None:
        return _JsonFields(sent.json)
    values = Parameters.grouped([*sent.query, *sent.form])
    return {key: v if key == "q" and len(v) > 1 else v[0] for key, v in values.items()}


def _invalid_json(_problem: str) -> LibreTranslateInvalid:
    """LibreTranslate's words for any JSON body but an object's: it says no more."""
    return LibreTranslateInvalid(INVALID_JSON)


async def _authorize(fields: dict[str, Any], request: Request) -> tuple[str | None, Caller]:
    """The request's key (its ``api_key`` field, else the ``Authorization`` header), checked first
    as LibreTranslate checks it: a wrong one is refused with its 403; and its caller."""
    field = fields.get("api_key")
    key = (field if isinstance(field, str) else None) or bearer_key(request)
    try:
        return key, await authorized(request, key)
    except Unauthorized:
        raise InvalidApiKey(INVALID_KEY) if key else Unauthorized(KEY_REQUIRED) from None


def _validated(model: type[M], fields: dict[str, Any], *, strict: bool) -> M:
    """``fields`` as ``model``; refused in LibreTranslate's words where it has them."""
    try:
        return model.model_validate(fields, strict=strict)
    except ValidationError as e:
        errors = e.errors(include_url=False)
        message = _libretranslate_problem(errors)
        raise (
            InvalidRequest(describe_validation(errors)) if message is None else LibreTranslateInvalid(message)
        ) from None


def _libretranslate_problem(errors: list[Any]) -> str | None:
    """LibreTranslate's message for the first parameter it checks that is wrong, if it has one."""
    for name in ("q", "source", "target"):
        for err in errors:
            if err["loc"][:1] == (name,) and (err["type"] == "missing" or err.get("input") in (None, "", [])):
                return f"Invalid request: missing {name} parameter"
    for err in errors:
        if err["loc"][:1] == ("alternatives",):
            if err["type"] == "less_than_equal":
                return f"Invalid request: alternatives parameter must be <= {MAX_BEAM_SIZE - 1}"
            if err["type"] != "greater_than_equal":
                return "Invalid request: alternatives parameter is not a number"
        if err["loc"][:1] == ("format",) and isinstance(err.get("input"), str):
            return f"{err['input']} format is not supported"
    return None


# -- what the runtime found, in LibreTranslate's words -----------------------------------------


def _over_limit(exc: PayloadTooLarge, texts: list[str], settings: Settings) -> PayloadTooLarge:
    """LibreTranslate's "request (N) exceeds text limit (M)" for MT_MAX_TEXTS and MT_MAX_CHARS."""
    if len(texts) > settings.max_texts:
        size, limit = len(texts), settings.max_texts
    elif (chars := sum(map(len, texts))) > settings.max_chars:
        size, limit = chars, settings.max_chars
    else:  # another limit (the search's cost): the runtime's message says which
        return exc
    return TextLimit(f"Invalid request: request ({size}) exceeds text limit ({limit})")


def _unsupported(exc: UnsupportedLanguage, runtime: Runtime, source: str, target: str) -> UnsupportedLanguage:
    """LibreTranslate's "xx is not supported" for a language no model has (the source first, as it
    checks), "<target> is not available as a target language from <source>" for an unserved pair."""
    _, router = runtime.serving()
    auto = source.lower() == "auto"
    detected = exc.details.get("detected_language")
    for name, side in (() if auto else ((source, "source"),)) + ((target, "target"),):
        if _code(router, name, side) is None:
            return UnsupportedLanguage(f"{name} is not supported", details=exc.details)
    if auto:
        message = f"{detected} is not supported" if detected else exc.message
        return UnsupportedLanguage(message, details=exc.details)
    src, tgt = _code(router, source, "source"), _code(router, target, "target")
    message = f"{_name(tgt)} ({tgt}) is not available as a target language from {_name(src)} ({src})"
    return UnsupportedLanguage(message, details=exc.details)


def _code(router: Router, name: str, side: str) -> str | None:
    try:
        return router.code(name, side)
    except languages.UnsupportedLanguage:
        return None


def _name(code: str | None) -> str:
    return LANGUAGE_NAMES.get(code or "", code or "")
