"""The service's own API: ``POST /v1/translate`` and ``GET /v1/models``."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.routes.common import RuntimeDep, bearer_key, error_responses, get_runtime, unless_disconnected
from service.runtime import TranslationJob
from service.schemas import (
    BEARER_AUTH,
    LanguageOut,
    ModelOut,
    ModelsResponse,
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
    responses=error_responses(400, 401, 413, 422, 429, 503, 504),
    tags=["translation"],
    openapi_extra={**json_body(TranslateRequest), **BEARER_AUTH},
)
async def translate(request: Request) -> Response:
    """Translate one text or a list of texts; optionally with scores, n-best lists and alignments."""
    # The body is parsed and the response serialized here, in one pydantic-core pass each, rather
    # than by FastAPI's parameter and response-model machinery: this route carries the load.
    runtime = await get_runtime(request)
    body = validated(TranslateRequest, await request.body())
    job = TranslationJob(
        texts=body.texts,
        source_lang=body.source_lang,
        target_lang=body.target_lang,
        options=body.options(),
        api_key=bearer_key(request),
        timeout_s=body.timeout_s,
    )
    results = await unless_disconnected(request, runtime.translate(job))
    response = TranslateResponse(
        model=runtime.model_id, translations=[TranslationOut.from_result(r, body) for r in results]
    )
    return Response(response.model_dump_json(exclude_none=True), media_type="application/json")


@router.get("/v1/models", response_model=ModelsResponse, tags=["models"])
async def models(runtime: RuntimeDep) -> ModelsResponse:
    """The loaded model: languages, version, variant, execution provider, measured quality."""
    info = runtime.loaded_info()
    return ModelsResponse(
        models=[
            ModelOut(
                id=runtime.model_id,
                name=info.name,
                version=info.version,
                source_languages=[LanguageOut(code=x.code, model_code=x.model_code) for x in info.languages.source],
                target_languages=[LanguageOut(code=x.code, model_code=x.model_code) for x in info.languages.target],
                variant=info.variant,
                provider=info.provider,
                quality=info.quality,
            )
        ]
    )
