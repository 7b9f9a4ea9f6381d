"""Probes and metrics: what an orchestrator and Prometheus call."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from service.errors import Unavailable
from service.routes.common import RuntimeDep, error_responses
from service.routes.glossaries import glossary_store

router = APIRouter(tags=["operations"])
# The probes' own thread: a readiness check never waits behind the glossary store's calls, which
# share asyncio's default pool.
_PROBES = ThreadPoolExecutor(1, thread_name_prefix="mt-probe")


@router.get("/healthz", responses=error_responses(503))
async def healthz(runtime: RuntimeDep) -> dict[str, str]:
    """Liveness: the process serves requests (fails only when no model could be loaded)."""
    runtime.check_live()
    return {"status": "ok"}


@router.get("/readyz", responses=error_responses(503))
async def readyz(request: Request, runtime: RuntimeDep) -> dict[str, Any]:
    """Readiness: 200 once the preloaded models are warm, listing models that failed to load
    (the others serve); 503 while loading, when no model can serve, while every engine process is
    down, while the glossary store is damaged, until the state database has been reached, or while
    draining."""
    failed = await runtime.check_ready()
    if (unready := await runtime.access.unready()) is not None:
        raise Unavailable(f"the state database (MT_DATABASE_URL) cannot be reached yet: {unready}")
    problem = await asyncio.get_running_loop().run_in_executor(_PROBES, glossary_store(request).problem)
    if problem is not None:
        raise Unavailable(f"the glossary store (MT_DATA_DIR) cannot be used: {problem}")
    return {"status": "degraded", "failed_models": failed} if failed else {"status": "ready"}


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics (text exposition format)."""
    body, content_type = runtime.metrics.render()
    return Response(body, media_type=content_type)
