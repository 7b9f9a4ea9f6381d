"""The FastAPI application: lifespan, middleware, and the native routes.

Layers: routes and schemas (here and in ``libretranslate.py``) -> ``Runtime`` (limits, cache,
readiness) -> ``Batcher`` -> ``Translator`` -> onnxruntime. Errors from any layer become HTTP
responses in ``errors.py`` only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response

from service import libretranslate
from service.errors import Unavailable, install_error_handlers
from service.metrics import Metrics
from service.middleware import BodyLimit, RequestAccounting
from service.runtime import Runtime, RuntimeDep, TranslatorFactory, bearer_key, get_runtime
from service.schemas import (
    BEARER_AUTH,
    BEARER_SCHEME,
    ErrorResponse,
    ModelOut,
    ModelsResponse,
    TranslateRequest,
    TranslateResponse,
    TranslationOut,
    json_body,
    validated,
)
from service.settings import Settings

log = logging.getLogger(__name__)

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse} for status in (400, 401, 413, 422, 429, 503, 504)
}


def create_app(
    settings: Settings | None = None,
    *,
    translator_factory: TranslatorFactory | None = None,
    on_load_failure: Callable[[], None] | None = None,
) -> FastAPI:
    """Build the app. The model loads in the background once the server starts: /healthz answers
    at once, /readyz turns 200 when the model is warm. ``on_load_failure`` is called if it cannot
    load (``python -m service`` then exits non-zero)."""
    settings = settings or Settings()
    metrics = Metrics()
    runtime = Runtime(settings, metrics, factory=translator_factory)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        loading = asyncio.create_task(_load(runtime, on_load_failure))
        yield
        await loading
        await runtime.close()

    app = FastAPI(
        title="mt-service",
        summary="Machine translation with dynamic batching, alignments and n-best lists.",
        version="1",
        lifespan=lifespan,
        responses={503: {"model": ErrorResponse}},
    )
    app.state.runtime = runtime
    install_error_handlers(app, lambda error_type: metrics.errors.labels(error_type).inc())
    # Added last = outermost: accounting sees every request, including those the body limit refuses.
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes, metrics=metrics)
    app.add_middleware(RequestAccounting, runtime=runtime)
    _add_routes(app)
    app.include_router(libretranslate.router)
    _declare_bearer_scheme(app)
    return app


def _declare_bearer_scheme(app: FastAPI) -> None:
    """Put the API-key scheme that ``BEARER_AUTH`` names into the OpenAPI schema (and so /docs'
    Authorize button): no route declares it through a FastAPI security dependency."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schemes = build().setdefault("components", {}).setdefault("securitySchemes", {})
            description = "An API key from MT_API_KEYS (only when keys are configured)."
            schemes[BEARER_SCHEME] = {"type": "http", "scheme": "bearer", "description": description}
        return app.openapi_schema

    app.openapi = openapi


async def _load(runtime: Runtime, on_failure: Callable[[], None] | None) -> None:
    try:
        await runtime.load()
    except Exception as exc:
        runtime.load_error = f"the model could not be loaded: {exc}"
        log.exception("the model could not be loaded from %s", runtime.settings.model_dir)
        if on_failure is not None:
            on_failure()


def _add_routes(app: FastAPI) -> None:
    @app.post(
        "/v1/translate",
        response_model=TranslateResponse,
        responses=ERROR_RESPONSES,
        tags=["translation"],
        openapi_extra={**json_body(TranslateRequest), **BEARER_AUTH},
    )
    async def translate(request: Request) -> Response:
        """Translate one text or a list of texts; optionally with scores, n-best lists and alignments."""
        # The body is parsed and the response serialized here, in one pydantic-core pass each,
        # rather than by FastAPI's parameter and response-model machinery: this route carries the
        # load, and that machinery was a quarter of the HTTP process's CPU per request.
        runtime = await get_runtime(request)
        runtime.authorize(bearer_key(request))
        body = validated(TranslateRequest, await request.body())
        texts = body.texts
        runtime.check_size(texts)
        runtime.check_languages(body.source_lang, body.target_lang)
        results = await runtime.translate(request, texts, body.options(), timeout_s=body.timeout_s)
        response = TranslateResponse(
            model=runtime.model_id, translations=[TranslationOut.from_result(r, body) for r in results]
        )
        return Response(response.model_dump_json(exclude_none=True), media_type="application/json")

    @app.get("/v1/models", response_model=ModelsResponse, tags=["models"])
    async def models(runtime: RuntimeDep) -> ModelsResponse:
        """The loaded model: languages, version, variant, execution provider, measured quality."""
        info = runtime.loaded_info()
        return ModelsResponse(
            models=[
                ModelOut(
                    id=runtime.model_id,
                    name=info.name,
                    version=info.version,
                    source_language=info.source_language,
                    target_language=info.target_language,
                    variant=info.variant,
                    provider=info.provider,
                    quality=info.quality,
                )
            ]
        )

    @app.get("/healthz", tags=["operations"])
    async def healthz(runtime: RuntimeDep) -> dict[str, str]:
        """Liveness: the process serves requests (fails only when the model could not be loaded)."""
        if runtime.load_error:
            raise Unavailable(runtime.load_error)
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"])
    async def readyz(runtime: RuntimeDep) -> dict[str, str]:
        """Readiness: 200 once the model is loaded and warm; 503 while loading or draining."""
        if runtime.draining:
            raise Unavailable("draining: the service is shutting down")
        if not runtime.ready:
            raise Unavailable(runtime.load_error or "the model is still loading")
        return {"status": "ready"}

    @app.get("/metrics", tags=["operations"])
    async def metrics(runtime: RuntimeDep) -> Response:
        """Prometheus metrics (text exposition format)."""
        body, content_type = runtime.metrics.render()
        return Response(body, media_type=content_type)
