"""The translation web page (``MT_WEB_UI``): ``/`` and its scripts and styles under ``/assets``.

Every file comes from ``service/web/``, none from a CDN, so the page works offline and air-gapped;
its Content-Security-Policy has the browser refuse anything from elsewhere. The page names the
service's URLs relative to a ``<base>`` set to the path prefix the request came through
(``MT_ROOT_PATH``), so that it works behind a reverse proxy.
"""

from __future__ import annotations

import html
from pathlib import Path
from string import Template
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
ASSETS_PATH = "/assets"
CONTENT_SECURITY_POLICY = "default-src 'self'; base-uri 'self'; form-action 'none'; frame-ancestors 'self'"
_PAGE = Template((WEB_DIR / "index.html").read_text(encoding="utf-8"))

router = APIRouter(include_in_schema=False)


@router.get("/")
async def page(request: Request) -> HTMLResponse:
    base = html.escape(f"{request.scope.get('root_path', '')}/", quote=True)
    return HTMLResponse(_PAGE.substitute(base=base), headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY})


class _Revalidated(StaticFiles):
    """Files that the browser revalidates on each use (a 304 while unchanged), so that an upgraded
    service never runs with an older script from the browser's cache."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


def install(app: FastAPI) -> None:
    """Serve the page and its assets."""
    app.include_router(router)
    app.mount(ASSETS_PATH, _Revalidated(directory=WEB_DIR / "assets"), name="web-assets")
