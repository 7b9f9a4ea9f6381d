"""The request option that turns a model's vocabulary shortlist on or off, on a real server."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest
from live_server import StartService

from engine.bundle import load_bundle
from engine.shortlist import Shortlist
from export.shortlist import write

TEXT = "A dog runs in the park."


@pytest.fixture(scope="module")
def client(start_service: StartService, tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory):
    """A server of a bundle whose shortlist, on by default, is a handful of pieces: whatever it
    translates with it shows."""
    bundle = tmp_path_factory.mktemp("shortlisted") / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    vocab = load_bundle(bundle).manifest.dimensions.vocab_size
    write(bundle, Shortlist(np.full((vocab, 1), -1), np.arange(3, 12)), default=True, bleu={})
    server = start_service(model_dir=str(bundle))
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def translation(client: httpx.Client, **options: object) -> str:
    response = client.post("/v1/translate", json={"text": TEXT, "target_lang": "de", **options})
    assert response.status_code == 200, response.text
    return response.json()["translations"][0]["text"]


def test_the_model_default_is_its_shortlist_and_a_request_may_turn_it_off(client: httpx.Client) -> None:
    default, on, off = translation(client), translation(client, shortlist=True), translation(client, shortlist=False)
    assert default == on != off


def test_a_shortlist_that_is_not_a_boolean_is_refused(client: httpx.Client) -> None:
    response = client.post("/v1/translate", json={"text": TEXT, "target_lang": "de", "shortlist": "maybe"})
    assert response.status_code == 422 and response.json()["error"]["type"] == "invalid_request"
