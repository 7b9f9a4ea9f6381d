"""The FastAPI application: lifespan, middleware, and the route modules.

Layers: routes and schemas (``routes/``) -> ``Runtime`` (checks, cache, readiness, draining) ->
``Batcher`` -> an ``engine.api.Engine`` -> onnxruntime. Errors from any layer become HTTP responses
in ``errors.py`` only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from starlette.middleware.cors import CORSMiddleware

from service import openapi
from service.access import Access
from service.database import PostgresDatabase, open_database
from service.document_jobs import DocumentJobs
from service.documents import DocumentProcess, translate_document
from service.errors import install_error_handlers
from service.file_store import FileStore
from service.glossaries import GlossaryStore
from service.keys import KeyStore
from service.metrics import Metrics
from service.middleware import BodyLimit, CloseUnreadBody, HeadAsGet, RequestAccounting, RootPath, SlowBody
from service.routes import deepl, files, glossaries, libretranslate, libretranslate_errors, operations, stream, v1, web
from service.runtime import EngineFactory, Runtime, StartupError
from service.settings import Settings

log = logging.getLogger(__name__)

CORS_MAX_AGE_S = 24 * 3600  # how long a browser may reuse a preflight's answer
FILES_DIRECTORY = "files"  # under MT_DATA_DIR: files waiting for download, without MT_DATABASE_URL


def create_app(
    settings: Settings | None = None,
    *,
    engine_factory: EngineFactory | None = None,
    on_load_failure: Callable[[], None] | None = None,
) -> FastAPI:
    """Build the app. The models load in the background once the server starts: /healthz answers
    at once, /readyz turns 200 when the preloaded models are warm. ``on_load_failure`` is called if
    no model can serve (``python -m service`` then exits non-zero)."""
    settings = settings or Settings()
    metrics = Metrics()
    runtime = Runtime(settings, metrics, factory=engine_factory)
    database = open_database(settings.database_url, settings.data_dir)
    runtime.access = Access(settings, KeyStore(database))
    # With MT_DATABASE_URL, in the database every replica shares; else SQLite (and files) in MT_DATA_DIR.
    shared = database if isinstance(database, PostgresDatabase) else None
    glossary_store = GlossaryStore(settings.data_dir, postgres=shared)
    file_store = FileStore(
        database, settings.file_expiry_s, directory=None if shared else settings.data_dir / FILES_DIRECTORY
    )
    documents = DocumentProcess(
        settings.max_document_bytes,
        max_texts=settings.max_document_texts,
        memory_mb=settings.document_memory_mb,
        timeout_s=settings.document_timeout_s,
    )
    document_jobs = DocumentJobs(
        database,
        file_store,
        translate=functools.partial(translate_document, runtime, documents),
        expiry_s=settings.file_expiry_s,
        find_glossary=functools.partial(glossaries.job_glossary, glossary_store),
        lease_s=settings.document_lease_s,
        started=runtime.in_flight.enter,  # counted in flight until translated: drained first
        finished=runtime.in_flight.leave,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        loading = asyncio.create_task(_load(runtime, on_load_failure))
        expiring = asyncio.create_task(file_store.expire_periodically())
        sweeping = asyncio.create_task(document_jobs.sweep_periodically())
        # The database reached (its schema made) at start, or one line saying why not; readiness
        # stays 503 until it is reached.
        reaching = asyncio.create_task(runtime.access.unready())
        yield
        expiring.cancel()
        sweeping.cancel()
        documents.close()
        # Models still loading are given up (``Runtime.load``), not waited for: a large one could
        # outlast the orchestrator's grace period, and the process would be killed mid-shutdown.
        loading.cancel()
        await asyncio.wait({loading})
        await runtime.close()
        await asyncio.wait({reaching})
        await runtime.access.count()
        runtime.access.close()

    # /docs and /redoc load Swagger UI and ReDoc from the service itself, not from a CDN; Swagger
    # UI's validator badge, which sends the document's URL to validator.swagger.io, is off.
    app = FastAPIOffline(
        title="mt-service",
        summary="Machine translation with dynamic batching, alignments and n-best lists.",
        version="1",
        lifespan=lifespan,
        swagger_ui_parameters={"validatorUrl": None},
    )
    app.state.runtime = runtime
    app.state.files = file_store
    app.state.document_jobs = document_jobs
    app.state.documents = documents
    app.state.uploads = files.UploadSlots(settings.max_uploads)
    app.state.glossaries = glossary_store
    install_error_handlers(
        app,
        lambda error_type: metrics.errors.labels(error_type).inc(),
        dialects=[(libretranslate_errors.answers_as_libretranslate, libretranslate_errors.libretranslate_response)],
    )
    # Added later = further out: accounting sees every request, including those the body's limit
    # and timeout refuse, with the path prefix known; every answer given before the body was read,
    # theirs too, closes its connection.
    upload_paths = (*files.UPLOAD_PATHS, *deepl.UPLOAD_PATHS)
    uploads = dict.fromkeys(upload_paths, settings.max_file_bytes + files.FORM_OVERHEAD_BYTES)
    app.add_middleware(HeadAsGet)
    app.add_middleware(BodyLimit, max_bytes=settings.max_request_bytes, metrics=metrics, path_limits=uploads)
    app.add_middleware(
        SlowBody,
        timeout_s=settings.idle_timeout_s,
        min_rate=settings.min_body_rate,
        window_s=settings.body_rate_window_s,
    )
    app.add_middleware(RequestAccounting, runtime=runtime)
    app.add_middleware(CloseUnreadBody)
    if settings.root_path:
        app.add_middleware(RootPath, prefix=settings.root_path)
    if settings.cors_origin_list:
        # Outermost: a browser's preflight is answered before any other check, and every answer,
        # errors included, carries the headers that let the calling page read it.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origin_list,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            max_age=CORS_MAX_AGE_S,
        )
    for module in (v1, stream, files, glossaries, operations, libretranslate, deepl):
        app.include_router(module.router)
    if settings.web_ui:
        web.install(app)
    openapi.install(app, runtime)
    return app


async def _load(runtime: Runtime, on_failure: Callable[[], None] | None) -> None:
    try:
        await runtime.load()
    except Exception as exc:
        runtime.load_error = runtime.load_error or f"no model could be loaded: {exc}"
        # An expected failure (the configuration, the repository) is one line; any other is a bug.
        log.error("%s", runtime.load_error, exc_info=None if isinstance(exc, StartupError) else exc)
        if on_failure is not None:
            on_failure()
