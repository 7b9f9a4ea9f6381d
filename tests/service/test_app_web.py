"""The web page's routes, in process (no model is loaded): what is served, from where, under which
prefix, and nothing when MT_WEB_UI is off. tests/service/test_web_browser.py runs the page itself."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.middleware import route_path
from service.routes.web import CONTENT_SECURITY_POLICY, WEB_DIR
from service.settings import Settings

# JavaScript modules import one another by relative URL.
_IMPORT = re.compile(r'^import .* from "([^"]+)";$', re.MULTILINE)
# The only absolute URL the assets may hold is a namespace, which nothing fetches.
_URL = re.compile(r"https?://[^\s\"')]+")
_NAMESPACES = {"http://www.w3.org/2000/svg"}


class _Links(HTMLParser):
    """The base and every URL a page loads or links to."""

    def __init__(self) -> None:
        super().__init__()
        self.base: str | None = None
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value for name, value in attrs if value is not None}
        if tag == "base":
            self.base = values["href"]
        else:
            self.urls += [values[name] for name in ("src", "href") if name in values]


def client(**settings: object) -> TestClient:
    return TestClient(create_app(Settings(model_dir=Path("unused"), **settings)))


def page_links(web: TestClient, path: str) -> _Links:
    response = web.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    links = _Links()
    links.feed(response.text)
    return links


def test_the_page_loads_everything_from_the_service_by_relative_urls() -> None:
    web = client()
    links = page_links(web, "/")
    assert links.base == "/"
    assert links.urls and all(not urlsplit(url).scheme and not url.startswith("/") for url in links.urls), links.urls
    modules = [url for url in links.urls if url.endswith(".js")]
    fetched = set()
    while modules:
        url = modules.pop()
        fetched.add(url)
        script = web.get(urljoin(links.base, url))
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        modules += {urljoin(url, imported) for imported in _IMPORT.findall(script.text)} - fetched
    for url in links.urls:
        assert web.get(urljoin(links.base, url)).status_code == 200, url
    assets = list((WEB_DIR / "assets").iterdir())
    assert {f"assets/{path.name}" for path in assets if path.suffix == ".js"} == fetched
    for path in assets:
        assert set(_URL.findall(path.read_text(encoding="utf-8"))) <= _NAMESPACES, path.name


def test_assets_are_revalidated_so_that_an_upgrade_is_seen() -> None:
    response = client().get("/assets/style.css")
    assert response.status_code == 200 and response.headers["cache-control"] == "no-cache"
    assert client().get("/assets/style.css", headers={"If-None-Match": response.headers["etag"]}).status_code == 304


@pytest.mark.parametrize("path", ["/mt/", "/mt", "/"])
def test_behind_a_path_prefix_whether_the_proxy_strips_it_or_not(path: str) -> None:
    web = client(root_path="/mt/")
    assert page_links(web, path).base == "/mt/"
    assert web.get(f"{path.rstrip('/')}/assets/app.js").status_code == 200
    assert "'/mt/openapi.json'" in web.get(f"{path.rstrip('/')}/docs").text
    assert web.get(f"{path.rstrip('/')}/openapi.json").json()["servers"] == [{"url": "/mt"}]


def test_off_with_mt_web_ui_false() -> None:
    web = client(web_ui=False)
    assert web.get("/").status_code == 404
    assert web.get("/assets/app.js").status_code == 404


def test_not_in_the_openapi_document() -> None:
    paths = create_app(Settings(model_dir=Path("unused"))).openapi()["paths"]
    assert "/" not in paths and not [path for path in paths if path.startswith("/assets")]


@pytest.mark.parametrize(
    ("path", "root_path", "seen"),
    [
        ("/v1/translate", "", "/v1/translate"),
        ("/v1/translate", "/mt", "/v1/translate"),  # the proxy stripped the prefix
        ("/mt/v1/translate", "/mt", "/v1/translate"),  # the proxy passed it on
        ("/mt", "/mt", "/"),
        ("/mtx/v1/translate", "/mt", "/mtx/v1/translate"),
    ],
)
def test_the_middleware_sees_the_path_without_the_prefix(path: str, root_path: str, seen: str) -> None:
    assert route_path({"type": "http", "path": path, "root_path": root_path}) == seen


@pytest.mark.parametrize("path", ["/mt/v1/translate", "/v1/translate", "/mt/translate"])
def test_translation_requests_are_known_under_the_prefix(path: str) -> None:
    """A draining service refuses them before reading them, with or without the prefix."""
    web = client(root_path="/mt")
    web.app.state.runtime.in_flight.start_draining()  # type: ignore[attr-defined]
    response = web.post(path, json={"text": "A dog.", "target_lang": "de"})
    assert response.status_code == 503
    assert response.json()["error"]["message"] == "the service is shutting down"


@pytest.mark.parametrize("path", ["/mt/v1/translate_file", "/v1/translate_file"])
def test_uploads_keep_their_own_size_limit_under_the_prefix(path: str) -> None:
    """A file over MT_MAX_REQUEST_BYTES but within MT_MAX_FILE_BYTES is read (then refused: no model)."""
    web = client(root_path="/mt", max_request_bytes=2048, max_file_bytes=1 << 16)
    response = web.post(path, files={"file": ("a.txt", b"A dog runs. " * 1000)}, data={"target_lang": "de"})
    assert response.status_code == 503, response.text
