"""Two service instances on one PostgreSQL database, as two replicas behind a load balancer: what a
client stores through one is there through the other (the instances and keys of
``test_managed_keys``)."""

from __future__ import annotations

import deepl
import httpx
from live_server import ServiceProcess
from postgres_server import postgres  # noqa: F401 (the fixture)
from test_managed_keys import Keys, clients, database, keys, replicas  # noqa: F401 (the fixtures)

TEXT = "A dog runs in the park."


def translate(client: httpx.Client, key: str, glossary: str) -> httpx.Response:
    body = {"text": TEXT, "source_lang": "en", "target_lang": "de", "glossary": glossary}
    return client.post("/v1/translate", json=body, headers={"Authorization": f"Bearer {key}"})


def test_a_glossary_made_on_one_replica_is_used_changed_and_deleted_on_the_other(
    clients: tuple[httpx.Client, httpx.Client],  # noqa: F811
    replicas: tuple[ServiceProcess, ServiceProcess],  # noqa: F811
    keys: Keys,  # noqa: F811
) -> None:
    a, b = clients
    secret = keys.create()
    auth = {"Authorization": f"Bearer {secret}"}
    on_a = deepl.Translator(secret, server_url=replicas[0].url)
    on_b = deepl.Translator(secret, server_url=replicas[1].url)
    made = on_a.create_glossary("pets", "EN", "DE", {"dog": "katze"})

    used = translate(b, secret, made.glossary_id)
    assert used.status_code == 200, used.text
    assert "katze" in used.json()["translations"][0]["text"]
    assert (
        on_b.translate_text(TEXT, source_lang="EN", target_lang="DE", glossary=made).text
        == (used.json()["translations"][0]["text"])
    )

    # Changed through one, the other uses the change at its next request.
    assert (
        b.put(
            f"/v1/glossaries/{made.glossary_id}/entries",
            json={"entries": [{"source": "dog", "target": "maus"}]},
            headers=auth,
        ).status_code
        == 200
    )
    assert on_a.get_glossary_entries(made) == {"dog": "maus"}
    assert "maus" in translate(a, secret, made.glossary_id).json()["translations"][0]["text"]

    on_b.delete_glossary(made)
    assert translate(a, secret, made.glossary_id).status_code == 404
    assert made.glossary_id not in [g.glossary_id for g in on_a.list_glossaries()]


def test_a_keys_glossaries_are_its_own_on_every_replica(
    clients: tuple[httpx.Client, httpx.Client],  # noqa: F811
    keys: Keys,  # noqa: F811
) -> None:
    a, b = clients
    mine, theirs = keys.create(), keys.create()
    body = {"name": "mine", "source_lang": "en", "target_lang": "de", "entries": [{"source": "dog", "target": "katze"}]}
    made = a.post("/v1/glossaries", json=body, headers={"Authorization": f"Bearer {mine}"}).json()
    assert translate(b, theirs, made["glossary_id"]).status_code == 404
    assert translate(b, mine, made["glossary_id"]).status_code == 200
