"""LibreTranslate-compatible endpoints, so that existing LibreTranslate clients work unchanged.

``POST /translate`` takes a JSON or form body (``q``, ``source``, ``target``, ``format``,
``alternatives``, ``api_key``) and answers ``{"translatedText": ...}`` with LibreTranslate's shapes:
a string for a string ``q``, a list for a list, plus ``alternatives`` and ``detectedLanguage`` when
asked. ``source: "auto"`` is accepted because the model has a single source language; it is
reported as detected with full confidence, without running any detection. Errors keep this
service's own ``{"error": {"type", "message"}}`` shape.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from starlette.exceptions import HTTPException

from engine.translator import TranslationOptions
from service.errors import InvalidRequest
from service.runtime import RuntimeDep, bearer_key
from service.schemas import BEARER_AUTH, ErrorResponse, LibreLanguage, LibreTranslateRequest, json_body, validated

router = APIRouter(tags=["LibreTranslate compatibility"])

LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "cs": "Czech", "it": "Italian"}
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


@router.post(
    "/translate",
    openapi_extra={**json_body(LibreTranslateRequest, *_FORM_TYPES), **BEARER_AUTH},
    responses={status: {"model": ErrorResponse} for status in (401, 400, 413, 422, 429, 504)},
)
async def translate(request: Request, runtime: RuntimeDep) -> dict[str, Any]:
    """LibreTranslate's translate: ``{"translatedText": str | list[str], "alternatives"?, "detectedLanguage"?}``."""
    body = await _parse(request)
    runtime.authorize(body.api_key or bearer_key(request))
    texts = body.texts
    runtime.check_size(texts)
    auto = body.source.lower() == "auto"
    runtime.check_languages(None if auto else body.source, body.target)
    options = TranslationOptions()
    if body.alternatives:
        n = body.alternatives + 1
        options = replace(options, num_hypotheses=n, beam_size=max(options.beam_size, n))
    results = await runtime.translate(request, texts, options)

    single = isinstance(body.q, str)
    translated = [r.text for r in results]
    response: dict[str, Any] = {"translatedText": translated[0] if single else translated}
    if body.alternatives:
        alternatives = [[h.text for h in r.hypotheses[1:]] for r in results]
        response["alternatives"] = alternatives[0] if single else alternatives
    if auto:
        detected = {"confidence": 100.0, "language": runtime.loaded_info().source_language}
        response["detectedLanguage"] = detected if single else [detected] * len(texts)
    return response


@router.get("/languages", response_model=list[LibreLanguage])
async def languages(runtime: RuntimeDep) -> list[LibreLanguage]:
    """The languages and, for each, the languages it can be translated into."""
    info = runtime.loaded_info()
    src, tgt = info.source_language, info.target_language
    return [
        LibreLanguage(code=src, name=LANGUAGE_NAMES.get(src, src), targets=[tgt]),
        LibreLanguage(code=tgt, name=LANGUAGE_NAMES.get(tgt, tgt), targets=[]),
    ]


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
