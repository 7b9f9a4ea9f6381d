"""LibreTranslate-compatible endpoints, so that existing LibreTranslate clients work unchanged.

``POST /translate`` takes a JSON or form body (``q``, ``source``, ``target``, ``format``,
``alternatives``, ``api_key``) and answers ``{"translatedText": ...}`` with LibreTranslate's shapes:
a string for a string ``q``, a list for a list, plus ``alternatives``, and ``detectedLanguage``
(confidence 0-100) for ``source: "auto"``. ``POST /detect``, ``GET /languages`` and
``GET /frontend/settings`` answer as LibreTranslate's do (``POST /translate_file`` and
``GET /download_file``: ``routes/files.py``). Errors keep this service's own
``{"error": {"type", "message"}}`` shape.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from engine.api import TranslationOptions
from engine.documents import SUPPORTED_EXTENSIONS
from service.errors import InvalidRequest
from service.routes.common import RuntimeDep, bearer_key, error_responses, form_error, unless_disconnected
from service.runtime import TranslationJob
from service.schemas import (
    BEARER_AUTH,
    INTEGRAL,
    LANGUAGE_PAIR,
    MAX_BEAM_SIZE,
    OTHER_LANGUAGE_NAMES,
    SourceLanguage,
    TargetLanguage,
    TextOrTexts,
    json_body,
    validated,
)

router = APIRouter(tags=["LibreTranslate compatibility"])

LANGUAGE_NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "et": "Estonian", "fi": "Finnish", "fr": "French", "ga": "Irish",
    "hr": "Croatian", "hu": "Hungarian", "it": "Italian", "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian",
    "lv": "Latvian", "nb": "Norwegian Bokmål", "nl": "Dutch", "no": "Norwegian", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sl": "Slovenian", "sr": "Serbian",
    "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class LibreTranslateRequest(BaseModel):
    """Its ``POST /translate`` body, sent as JSON or as a form; unknown fields are ignored as it does."""

    model_config = ConfigDict(
        extra="ignore",
        strict=True,
        json_schema_extra={
            "examples": [{"q": "A dog runs on the grass.", "source": "en", "target": "de"}],
            LANGUAGE_PAIR: ["source", "target"],
        },
    )

    q: TextOrTexts = Field(
        description="A text or a list of texts (a repeated form field): at most MT_MAX_TEXTS, "
        "and MT_MAX_CHARS characters in all (413)."
    )
    source: SourceLanguage = Field("auto", description=f'"auto" = identified per text. {OTHER_LANGUAGE_NAMES}')
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
    openapi_extra={**json_body(LibreTranslateRequest, *_FORM_TYPES), **BEARER_AUTH},
    responses=error_responses(400, 401, 413, 422, 429, 503, 504),
)
async def translate(request: Request, runtime: RuntimeDep) -> dict[str, Any]:
    """LibreTranslate's translate: ``{"translatedText": str | list[str], "alternatives"?, "detectedLanguage"?}``."""
    body = await _parse(request)
    auto = body.source.lower() == "auto"
    job = TranslationJob(
        texts=body.texts,
        source_lang=None if auto else body.source,
        target_lang=body.target,
        # The beam widens to hold the alternatives.
        options=TranslationOptions(num_hypotheses=body.alternatives + 1, format=body.format),
        api_key=body.api_key or bearer_key(request),
    )
    done = await unless_disconnected(request, runtime.translate(job))

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
    openapi_extra={**json_body(LibreDetectRequest, *_FORM_TYPES), **BEARER_AUTH},
    responses=error_responses(401, 413, 422, 503),
)
async def detect(request: Request, runtime: RuntimeDep) -> list[dict[str, Any]]:
    """LibreTranslate's detect: ``[{"language": "fr", "confidence": 0-100}, ...]``, best first."""
    body = validated(LibreDetectRequest, await _body(request))
    runtime.authorize(body.api_key or bearer_key(request))
    found = runtime.detect(body.q)
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
        "apiKeys": bool(s.api_key_set),
        "keyRequired": bool(s.api_key_set),
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
async def languages(runtime: RuntimeDep) -> list[LibreLanguage]:
    """The languages and, for each, the languages it can be translated into (directly or through
    a pivot)."""
    _, routes = runtime.serving()
    targets: dict[str, list[str]] = {}
    for source, target in routes.pairs():
        targets.setdefault(source, []).append(target)
        targets.setdefault(target, [])
    return [
        LibreLanguage(code=code, name=LANGUAGE_NAMES.get(code, code), targets=t) for code, t in sorted(targets.items())
    ]


async def _parse(request: Request) -> LibreTranslateRequest:
    return validated(LibreTranslateRequest, await _body(request))


async def _body(request: Request) -> bytes | dict[str, Any]:
    """The body as JSON bytes or as a parsed form (a repeated form field ``q`` is a list of texts)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in _FORM_TYPES:
        try:
            form = await request.form()
        except HTTPException as exc:
            raise form_error(exc) from None
        return {key: _form_value(key, form.getlist(key)) for key in form}
    if content_type == "application/json" or content_type.endswith("+json"):
        return await request.body()
    raise InvalidRequest(f"unsupported content type {content_type or 'none'!r}: send JSON or a form")


def _form_value(key: str, values: list[Any]) -> Any:
    return values if key == "q" and len(values) > 1 else values[0]
