"""The service's own API: ``POST /v1/translate``, ``POST /v1/detect`` and ``GET /v1/models``."""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter, Request, Response

from engine.language_choice import as_answer, reported
from engine.runner import resolve_provider
from service.models import ModelSlot
from service.routes.common import (
    RuntimeDep,
    authorized,
    bearer_key,
    error_responses,
    get_runtime,
    translation_job,
    unless_disconnected,
)
from service.routes.glossaries import NO_GLOSSARY, request_glossary
from service.runtime import Runtime
from service.schemas import (
    BEARER_AUTH,
    DetectCandidate,
    DetectRequest,
    DetectResponse,
    LanguageOut,
    ModelOut,
    ModelsResponse,
    PairOut,
    TranslateRequest,
    TranslateResponse,
    TranslationOut,
    json_body,
    validated,
)

router = APIRouter()


@router.post(
    "/v1/translate",
    response_model=TranslateResponse,
    responses={**error_responses(400, 401, 403, 413, 422, 429, 503, 504), **NO_GLOSSARY},
    tags=["translation"],
    openapi_extra={**json_body(TranslateRequest), **BEARER_AUTH},
)
async def translate(request: Request) -> Response:
    """Translate one text or a list of texts; optionally with scores, n-best lists, alignments and a glossary."""
    # The body is parsed and the response serialized here, in one pydantic-core pass each, rather
    # than by FastAPI's parameter and response-model machinery: this route carries the load.
    runtime = await get_runtime(request)
    caller = await authorized(request, bearer_key(request))  # before the body: its errors are for those with a key
    body = validated(TranslateRequest, await request.body())
    job = replace(translation_job(body, request), glossary=await request_glossary(request, body.glossary))
    async with runtime.access.metered(caller, sum(map(len, job.texts))):
        done = await unless_disconnected(request, runtime.translate(job))
    detections = done.detections or [None] * len(done.results)
    translations = [
        TranslationOut.from_result(result, body, model, detection)
        for result, model, detection in zip(done.results, done.models, detections, strict=True)
    ]
    response = TranslateResponse(model=done.model or None, translations=translations)
    return Response(response.model_dump_json(exclude_none=True), media_type="application/json")


@router.post(
    "/v1/detect",
    response_model=DetectResponse,
    responses=error_responses(401, 413, 422, 503),
    tags=["translation"],
    openapi_extra={**json_body(DetectRequest), **BEARER_AUTH},
)
async def detect(request: Request, runtime: RuntimeDep) -> DetectResponse:
    """Identify the language of a text, among MT_DETECT_LANGUAGES (one to three words among the
    served languages, as /v1/translate takes them), or as a language outside them that the
    identifier is confident of (the language /v1/translate refuses the text as)."""
    # Read as /v1/translate reads its body: a body that is not UTF-8 JSON is a 422 as well.
    await authorized(request, bearer_key(request))
    body = validated(DetectRequest, await request.body())
    found = reported(as_answer(runtime.detect(body.text)))
    return DetectResponse(
        language=found.language,
        confidence=round(found.confidence, 4),
        candidates=[DetectCandidate(language=c.language, confidence=round(c.confidence, 4)) for c in found.candidates],
    )


@router.get("/v1/models", response_model=ModelsResponse, responses=error_responses(503), tags=["models"])
async def models(runtime: RuntimeDep) -> ModelsResponse:
    """Every model of the repository (loaded or not, or why it cannot serve) and every pair served."""
    pool, routes = runtime.serving()
    pairs = [
        PairOut(source=s, target=t, models=[hop.model for hop in routes.route(s, t).hops]) for s, t in routes.pairs()
    ]
    return ModelsResponse(models=[_model_out(slot, runtime) for slot in pool.slots.values()], pairs=pairs)


def _model_out(slot: ModelSlot, runtime: Runtime) -> ModelOut:
    manifest, info, loaded = slot.entry.manifest, slot.info, slot.loaded
    if manifest is None:
        return ModelOut(id=slot.entry.id, loaded=False, error=slot.error)
    languages = manifest.languages
    settings = runtime.settings
    variant = info.variant if info else settings.variant
    if variant == "auto":
        variant = getattr(manifest.default_variant, resolve_provider(settings.provider))
    quality = manifest.variants[variant].quality if variant in manifest.variants else {}
    return ModelOut(
        id=slot.entry.id,
        version=manifest.version,
        source_languages=[LanguageOut(code=x.code, model_code=x.model_code) for x in languages.source],
        target_languages=[LanguageOut(code=x.code, model_code=x.model_code) for x in languages.target],
        variant=variant,
        provider=info.provider if loaded and info else None,
        quality={name: q.model_dump(exclude_none=True) for name, q in quality.items()},
        loaded=loaded is not None,
        memory_mb=round(loaded.memory_bytes / 1e6, 1) if loaded else None,
        error=slot.error,
        card=manifest.card,
    )
