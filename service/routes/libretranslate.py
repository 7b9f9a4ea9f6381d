"""LibreTranslate-compatible endpoints, so that existing LibreTranslate clients work unchanged.

``POST /translate`` takes a JSON or form body (``q``, ``source``, ``target``, ``format``,
``alternatives``, ``api_key``) and answers ``{"translatedText": ...}`` with LibreTranslate's shapes:
a string for a string ``q``, a list for a list, plus ``alternatives`` and ``detectedLanguage`` when
asked. ``source: "auto"`` is accepted because the model has a single source language; it is
reported as detected with full confidence, without running any detection. Errors keep this
service's own ``{"error": {"type", "message"}}`` shape.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from engine.api import TranslationOptions
from engine.languages import pairs
from service.errors import InvalidRequest
from service.routes.common import RuntimeDep, bearer_key, error_responses, unless_disconnected
from service.runtime import Runtime, TranslationJob
from service.schemas import BEARER_AUTH, MAX_BEAM_SIZE, LanguageCode, TextOrTexts, json_body, validated

router = APIRouter(tags=["LibreTranslate compatibility"])

LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "cs": "Czech", "it": "Italian"}
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


class LibreTranslateRequest(BaseModel):
    """Its ``POST /translate`` body, sent as JSON or as a form; unknown fields are ignored as it does."""

    model_config = ConfigDict(extra="ignore")

    q: TextOrTexts
    source: LanguageCode = "auto"
    target: LanguageCode
    format: Literal["text"] = Field("text", description="Only plain text is supported.")
    alternatives: int = Field(0, ge=0, le=MAX_BEAM_SIZE - 1)
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
    responses=error_responses(401, 400, 413, 422, 429, 504),
)
async def translate(request: Request, runtime: RuntimeDep) -> dict[str, Any]:
    """LibreTranslate's translate: ``{"translatedText": str | list[str], "alternatives"?, "detectedLanguage"?}``."""
    body = await _parse(request)
    auto = body.source.lower() == "auto"
    job = TranslationJob(
        texts=body.texts,
        source_lang=None if auto else body.source,
        target_lang=body.target,
        options=_options(runtime, body.alternatives),
        api_key=body.api_key or bearer_key(request),
    )
    results = await unless_disconnected(request, runtime.translate(job))

    single = isinstance(body.q, str)
    translated = [r.text for r in results]
    response: dict[str, Any] = {"translatedText": translated[0] if single else translated}
    if body.alternatives:
        alternatives = [[h.text for h in r.hypotheses[1:]] for r in results]
        response["alternatives"] = alternatives[0] if single else alternatives
    if auto:
        # Until language identification: "auto" resolves only for a model with one source language.
        detected = {"confidence": 100.0, "language": runtime.loaded_info().languages.source[0].code}
        response["detectedLanguage"] = detected if single else [detected] * len(job.texts)
    return response


@router.get("/languages", response_model=list[LibreLanguage])
async def languages(runtime: RuntimeDep) -> list[LibreLanguage]:
    """The languages and, for each, the languages it can be translated into."""
    served = runtime.loaded_info().languages
    targets: dict[str, list[str]] = {lang.code: [] for lang in served.source + served.target}
    for source, target in pairs(served):
        targets[source].append(target)
    return [LibreLanguage(code=code, name=LANGUAGE_NAMES.get(code, code), targets=t) for code, t in targets.items()]


def _options(runtime: Runtime, alternatives: int) -> TranslationOptions:
    """The model's defaults; ``alternatives`` more hypotheses widen the beam to hold them."""
    if not alternatives:
        return TranslationOptions()
    n = alternatives + 1
    return TranslationOptions(beam_size=max(runtime.loaded_info().decoding.beam_size, n), num_hypotheses=n)


async def _parse(request: Request) -> LibreTranslateRequest:
    """The body as JSON or as a form (a repeated form field ``q`` is a list of texts)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in _FORM_TYPES:
        try:
            form = await request.form()
        except HTTPException as exc:  # Starlette's answer to a malformed multipart body
            raise InvalidRequest(f"malformed form body: {exc.detail}") from None
        return validated(LibreTranslateRequest, {key: _form_value(key, form.getlist(key)) for key in form})
    if content_type == "application/json" or content_type.endswith("+json"):
        return validated(LibreTranslateRequest, await request.body())
    raise InvalidRequest(f"unsupported content type {content_type or 'none'!r}: send JSON or a form")


def _form_value(key: str, values: list[Any]) -> Any:
    return values if key == "q" and len(values) > 1 else values[0]
