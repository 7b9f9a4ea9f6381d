"""Probes and metrics: what an orchestrator and Prometheus call."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse

from service.routes.common import RuntimeDep, error_responses

router = APIRouter(tags=["operations"])


@router.get("/healthz", responses=error_responses(503))
async def healthz(runtime: RuntimeDep) -> dict[str, str]:
    """Liveness: the process serves requests (fails only when no model could be loaded)."""
    runtime.check_live()
    return {"status": "ok"}


@router.get("/readyz", responses=error_responses(503))
async def readyz(runtime: RuntimeDep) -> dict[str, Any]:
    """Readiness: 200 once the preloaded models are warm, listing models that failed to load
    (the others serve); 503 while loading, when no model can serve, while every engine process is
    down, or while draining."""
    failed = await runtime.check_ready()
    return {"status": "degraded", "failed_models": failed} if failed else {"status": "ready"}


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics (text exposition format)."""
    body, content_type = runtime.metrics.render()
    return Response(body, media_type=content_type)
