"""Probes and metrics: what an orchestrator and Prometheus call."""

from __future__ import annotations

from fastapi import APIRouter, Response

from service.routes.common import RuntimeDep

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz(runtime: RuntimeDep) -> dict[str, str]:
    """Liveness: the process serves requests (fails only when the model could not be loaded)."""
    runtime.check_live()
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(runtime: RuntimeDep) -> dict[str, str]:
    """Readiness: 200 once the model is loaded and warm; 503 while loading or draining."""
    runtime.check_ready()
    return {"status": "ready"}


@router.get("/metrics")
async def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics (text exposition format)."""
    body, content_type = runtime.metrics.render()
    return Response(body, media_type=content_type)
