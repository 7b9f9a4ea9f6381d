"""Glossaries over HTTP against a real server: ``/v1/glossaries`` (create, list, get, patch, replace,
delete, kept across restarts), and translating with one on /v1/translate, the stream, files and a
pivot.

The server serves relabelled copies of the tiny model (en->de, de->en, fr->en, so fr->de through
English). The tiny model translates "dog" into anything but "katze": a translation that says
"katze" uses the glossary's term.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import deepl
import httpx
import pytest
from httpx_sse import connect_sse
from live_server import API_KEYS, ServiceProcess, StartService, assert_error

from service.glossaries import DATABASE_NAME, MAX_ENTRIES, MAX_GLOSSARIES
from service.schemas import MAX_INLINE_ENTRIES
from tests.conftest import both_ways, relabelled_bundle

TEXT = "A dog runs in the park."
TERM = {"source": "dog", "target": "katze"}
FRENCH = "Le chien court dans le parc."


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("glossary_data")


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory, tiny_bundle: Path) -> Path:
    root = tmp_path_factory.mktemp("glossary_repository")
    both_ways(tiny_bundle, root)
    relabelled_bundle(tiny_bundle, root / "fr-en", "tiny-fr-en", ["fr"], ["en"])
    return root


def start(start_service: StartService, repository: Path, data_dir: Path) -> ServiceProcess:
    return start_service(
        model_dir="",
        models_dir=repository,
        data_dir=data_dir,
        api_keys=",".join(API_KEYS),
        detect_languages="en,de,fr",
        max_wait_ms=2,
    )


@pytest.fixture(scope="module")
def glossary_server(start_service: StartService, repository: Path, data_dir: Path) -> ServiceProcess:
    return start(start_service, repository, data_dir)


@pytest.fixture(scope="module")
def api(glossary_server: ServiceProcess) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {API_KEYS[0]}"}
    with httpx.Client(base_url=glossary_server.url, headers=headers, timeout=60) as client:
        yield client


def create(api: httpx.Client, **body: Any) -> dict[str, Any]:
    body = {"name": "animals", "source_lang": "en", "target_lang": "de", **body}
    if "entries_text" not in body:
        body.setdefault("entries", [TERM])
    response = api.post("/v1/glossaries", json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def translate(api: httpx.Client, **body: Any) -> list[dict[str, Any]]:
    response = api.post("/v1/translate", json={"text": TEXT, "source_lang": "en", "target_lang": "de", **body})
    assert response.status_code == 200, response.text
    return response.json()["translations"]  # type: ignore[no-any-return]


def assert_terms_consistent(text: str, translation: str, terms: list[dict[str, Any]]) -> None:
    for term in terms:
        start, end = term["source_span"]
        assert text[start:end].casefold() == term["source"].casefold(), (text, term)
        assert term["used"] == (term["target_span"] is not None)
        if term["used"]:
            start, end = term["target_span"]
            assert translation[start:end] == term["target"], (translation, term)


# -- /v1/glossaries ---------------------------------------------------------------------------


def test_create_list_get_patch_replace_delete(api: httpx.Client) -> None:
    created = create(api, entries=[TERM, {"source": "Park", "target": "haus", "case_sensitive": True}])
    assert {k: created[k] for k in ("name", "source_lang", "target_lang", "entry_count")} == {
        "name": "animals",
        "source_lang": "en",
        "target_lang": "de",
        "entry_count": 2,
    }
    assert created["creation_time"].endswith("Z")
    gid = created["glossary_id"]
    assert created in api.get("/v1/glossaries").json()["glossaries"]
    assert api.get(f"/v1/glossaries/{gid}").json() == {
        **created,
        "entries": [{**TERM, "case_sensitive": False}, {"source": "Park", "target": "haus", "case_sensitive": True}],
    }

    # Merged: "DOG" is "dog" (case-insensitive), "park" a new term beside the case-sensitive "Park".
    patch = {
        "name": "pets",
        "entries": [{"source": "DOG", "target": "hund"}, {"source": "cat", "target": "katze"}],
        "remove": ["Park"],
    }
    patched = api.patch(f"/v1/glossaries/{gid}", json=patch)
    assert patched.status_code == 200, patched.text
    assert (patched.json()["name"], patched.json()["entry_count"]) == ("pets", 2)
    assert api.get(f"/v1/glossaries/{gid}").json()["entries"] == [
        {"source": "DOG", "target": "hund", "case_sensitive": False},
        {"source": "cat", "target": "katze", "case_sensitive": False},
    ]

    replaced = api.put(f"/v1/glossaries/{gid}/entries", json={"entries": [TERM]})
    assert replaced.status_code == 200 and replaced.json()["entry_count"] == 1
    assert api.get(f"/v1/glossaries/{gid}").json()["entries"] == [{**TERM, "case_sensitive": False}]

    assert api.delete(f"/v1/glossaries/{gid}").status_code == 204
    for response in [
        api.get(f"/v1/glossaries/{gid}"),
        api.delete(f"/v1/glossaries/{gid}"),
        api.patch(f"/v1/glossaries/{gid}", json={"name": "x"}),
        api.put(f"/v1/glossaries/{gid}/entries", json={"entries": [TERM]}),
        api.post("/v1/translate", json={"text": TEXT, "target_lang": "de", "glossary": gid}),
    ]:
        assert_error(response, 404, "not_found")
    assert gid not in [g["glossary_id"] for g in api.get("/v1/glossaries").json()["glossaries"]]


def test_entries_as_deepl_takes_them(api: httpx.Client) -> None:
    tsv = create(api, entries_text="dog\tkatze\ncat\tHund\n")
    csv = create(api, entries_text='"hot dog",Hotdog\ncat,Katze\n', entries_format="csv")
    assert [e["source"] for e in api.get(f"/v1/glossaries/{tsv['glossary_id']}").json()["entries"]] == ["dog", "cat"]
    assert [e["source"] for e in api.get(f"/v1/glossaries/{csv['glossary_id']}").json()["entries"]] == [
        "hot dog",
        "cat",
    ]


def test_csv_rows_naming_other_languages_are_left_out(api: httpx.Client) -> None:
    # As DeepL reads its CSV: languages after the terms, in any case or as a variant DeepL names,
    # and a row for another pair (fr is served, but as a source into English only) left out, as is
    # one naming a variant DeepL does not (DE-DE), which no translation route takes either.
    text = (
        "dog,katze,EN,de\ncat,Hund,en-US,DE\nfox,Fuchs,fr,de\nbird,Vogel,en,en\nmouse,Maus,en,de,0.87\n"
        "owl,Eule,en,DE-DE\n"
    )
    created = create(api, entries_text=text, entries_format="csv")
    assert created["entry_count"] == 3
    entries = api.get(f"/v1/glossaries/{created['glossary_id']}").json()["entries"]
    assert [(e["source"], e["target"]) for e in entries] == [("dog", "katze"), ("cat", "Hund"), ("mouse", "Maus")]
    assert api.delete(f"/v1/glossaries/{created['glossary_id']}").status_code == 204


@pytest.mark.parametrize(
    ("text", "entry"),
    [
        ("cat,Katze,fr,es\n", 1),  # the defect: stored as an en->de entry
        ("\ncat,Katze,fr,de\nfox,Fuchs,de,en\n", 2),  # no row for the glossary's source
        ("cat,Katze,en,fr\n", 1),  # nor for its target
        ("dog,katze\ncat,Katze,en\n", 2),  # one language: which pair cannot be told
    ],
)
def test_csv_rows_for_no_glossary_languages_are_refused_naming_the_entry(
    api: httpx.Client, text: str, entry: int
) -> None:
    body = {"name": "animals", "source_lang": "en", "target_lang": "de", "entries_text": text, "entries_format": "csv"}
    error = assert_error(api.post("/v1/glossaries", json=body), 422, "invalid_glossary")
    assert error["entry"] == entry
    assert error["message"].startswith(f"entry {entry}: ")


def test_tsv_lines_have_no_language_columns(api: httpx.Client) -> None:
    created = create(api, entries_text="dog,fr\tkatze,es\n")
    entries = api.get(f"/v1/glossaries/{created['glossary_id']}").json()["entries"]
    assert [(e["source"], e["target"]) for e in entries] == [("dog,fr", "katze,es")]
    body = {"name": "animals", "source_lang": "en", "target_lang": "de", "entries_text": "dog\tkatze\ten\tde\n"}
    assert assert_error(api.post("/v1/glossaries", json=body), 422, "invalid_glossary")["entry"] == 1
    assert api.delete(f"/v1/glossaries/{created['glossary_id']}").status_code == 204


def test_a_key_sees_only_its_glossaries(api: httpx.Client, glossary_server: ServiceProcess) -> None:
    gid = create(api)["glossary_id"]
    with httpx.Client(base_url=glossary_server.url, headers={"Authorization": f"Bearer {API_KEYS[1]}"}) as other:
        assert gid not in [g["glossary_id"] for g in other.get("/v1/glossaries").json()["glossaries"]]
        assert_error(other.get(f"/v1/glossaries/{gid}"), 404, "not_found")
        assert_error(other.delete(f"/v1/glossaries/{gid}"), 404, "not_found")
        body = {"text": TEXT, "source_lang": "en", "target_lang": "de", "glossary": gid}
        assert_error(other.post("/v1/translate", json=body), 404, "not_found")
    with httpx.Client(base_url=glossary_server.url) as anonymous:
        assert_error(anonymous.get("/v1/glossaries"), 401, "unauthorized")
        assert_error(anonymous.post("/v1/translate", json=body), 401, "unauthorized")
    assert api.get(f"/v1/glossaries/{gid}").status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "error_type"),
    [
        ({"entries": [TERM, {"source": "Dog", "target": "hund"}]}, 422, "invalid_glossary"),  # a duplicate
        ({"entries": [{"source": " ", "target": "x"}]}, 422, "invalid_glossary"),  # an empty term
        ({"entries": [{"source": " ".join(["w"] * 17), "target": "x"}]}, 422, "invalid_glossary"),
        ({"entries_text": "dog\tkatze\ndog\thund"}, 422, "invalid_glossary"),
        ({"entries_text": "dog katze"}, 422, "invalid_glossary"),
        ({"entries": []}, 422, "invalid_request"),
        ({"entries": [{"source": "", "target": "x"}]}, 422, "invalid_request"),
        ({"entries": [TERM], "entries_text": "dog\tkatze"}, 422, "invalid_request"),
        ({"entries": [{"source": f"t{i}", "target": "x"} for i in range(MAX_ENTRIES + 1)]}, 422, "invalid_request"),
        ({"name": " "}, 422, "invalid_request"),
        ({"target_lang": "fr"}, 400, "unsupported_language"),  # no model translates into French
        ({"source_lang": "en", "target_lang": "en"}, 400, "unsupported_language"),
        ({"source_lang": "auto"}, 400, "unsupported_language"),
    ],
)
def test_invalid_glossaries_are_refused(api: httpx.Client, body: dict[str, Any], status: int, error_type: str) -> None:
    full = {"name": "bad", "source_lang": "en", "target_lang": "de", **body}
    if "entries_text" not in body:
        full.setdefault("entries", [TERM])
    before = len(api.get("/v1/glossaries").json()["glossaries"])
    assert_error(api.post("/v1/glossaries", json=full), status, error_type)
    assert len(api.get("/v1/glossaries").json()["glossaries"]) == before


def test_an_invalid_change_changes_nothing(api: httpx.Client) -> None:
    created = create(api, entries=[TERM, {"source": "cat", "target": "hund"}])
    gid = created["glossary_id"]
    duplicate = {"name": "renamed", "entries": [{"source": "CAT", "target": "x"}, {"source": "cat", "target": "y"}]}
    assert_error(api.patch(f"/v1/glossaries/{gid}", json=duplicate), 422, "invalid_glossary")
    everything = {"remove": ["dog", "cat"]}
    assert_error(api.patch(f"/v1/glossaries/{gid}", json=everything), 422, "invalid_glossary")
    assert_error(api.put(f"/v1/glossaries/{gid}/entries", json={"entries": []}), 422, "invalid_request")
    assert api.get(f"/v1/glossaries/{gid}").json() == {
        **created,
        "entries": [{**TERM, "case_sensitive": False}, {"source": "cat", "target": "hund", "case_sensitive": False}],
    }


def test_concurrent_creates(api: httpx.Client) -> None:
    def make(i: int) -> str:
        return create(api, name=f"concurrent {i}", entries=[{"source": f"word{i}", "target": "katze"}])["glossary_id"]

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(make, range(16)))
    listed = {g["glossary_id"]: g["name"] for g in api.get("/v1/glossaries").json()["glossaries"]}
    assert len(set(ids)) == 16 and {listed[gid] for gid in ids} == {f"concurrent {i}" for i in range(16)}


def test_glossaries_are_kept_across_restarts(
    api: httpx.Client, start_service: StartService, repository: Path, data_dir: Path
) -> None:
    created = create(api, name="kept", entries=[TERM, {"source": "Park", "target": "haus", "case_sensitive": True}])
    restarted = start(start_service, repository, data_dir)  # a new service on the same MT_DATA_DIR
    with httpx.Client(base_url=restarted.url, headers=api.headers, timeout=60) as again:
        assert (
            again.get(f"/v1/glossaries/{created['glossary_id']}").json()
            == api.get(f"/v1/glossaries/{created['glossary_id']}").json()
        )
        [translation] = translate(again, glossary=created["glossary_id"])
        assert "katze" in translation["text"]


# -- translating with a glossary ----------------------------------------------------------------


def test_translate_with_a_stored_or_an_inline_glossary(api: httpx.Client) -> None:
    [plain] = translate(api)
    assert "katze" not in plain["text"] and "glossary_terms" not in plain
    gid = create(api)["glossary_id"]
    for glossary in (gid, {"entries": [TERM]}):
        [translation] = translate(api, glossary=glossary)
        assert "katze" in translation["text"]
        [term] = translation["glossary_terms"]
        assert (term["source"], term["target"], term["source_span"], term["used"]) == ("dog", "katze", [2, 5], True)
        assert_terms_consistent(TEXT, translation["text"], translation["glossary_terms"])
    # A text that says no term: translated as without the glossary, with no terms to report.
    other = "A man sits under a tree."
    with_glossary = translate(api, text=other, glossary=gid)
    assert with_glossary[0]["glossary_terms"] == []
    assert with_glossary[0]["text"] == translate(api, text=other)[0]["text"]


def test_terms_said_twice_and_in_several_texts(api: httpx.Client) -> None:
    texts = ["A dog and a DOG run in the park.", "The dog sits.", "A man walks."]
    entries = [TERM, {"source": "park", "target": "haus"}]
    translations = translate(api, text=texts, glossary={"entries": entries})
    for text, translation in zip(texts, translations, strict=True):
        assert_terms_consistent(text, translation["text"], translation["glossary_terms"])
    assert [[t["source_span"] for t in tr["glossary_terms"]] for tr in translations] == [
        [[2, 5], [12, 15], [27, 31]],
        [[4, 7]],
        [],
    ]
    assert all(t["used"] for t in translations[1]["glossary_terms"])


def test_a_glossary_for_other_languages_is_refused(api: httpx.Client) -> None:
    gid = create(api)["glossary_id"]  # en->de
    for languages in ({"source_lang": "de", "target_lang": "en"}, {"source_lang": "fr", "target_lang": "de"}):
        body = {"text": TEXT, "glossary": gid, **languages}
        assert_error(api.post("/v1/translate", json=body), 400, "glossary_mismatch")
    body = {"text": TEXT, "target_lang": "en", "glossary": gid}  # the source identified
    assert_error(api.post("/v1/translate", json=body), 400, "glossary_mismatch")
    inline = {"entries": [{"source": "dog", "target": "katze"}, {"source": "DOG", "target": "hund"}]}
    body = {"text": TEXT, "target_lang": "de", "glossary": inline}
    assert_error(api.post("/v1/translate", json=body), 422, "invalid_glossary")


def test_with_the_source_identified_a_text_in_another_language_goes_without_the_glossary(api: httpx.Client) -> None:
    gid = create(api, entries=[{"source": "parc", "target": "katze"}, TERM])["glossary_id"]
    response = api.post("/v1/translate", json={"text": [TEXT, FRENCH], "target_lang": "de", "glossary": gid})
    assert response.status_code == 200, response.text
    english, french = response.json()["translations"]
    assert english["detected_language"]["language"] == "en" and "katze" in english["text"]
    assert french["detected_language"]["language"] == "fr" and french["glossary_terms"] == []


def test_a_pivot_uses_the_terms_the_text_says(api: httpx.Client) -> None:
    body = {"text": FRENCH, "source_lang": "fr", "target_lang": "de"}
    plain = api.post("/v1/translate", json=body).json()["translations"][0]
    assert plain["model"] == "tiny-fr-en:1.0.0+tiny-en-de:1.0.0" and "katze" not in plain["text"]
    gid = create(api, source_lang="fr", entries=[{"source": "chien", "target": "katze"}])["glossary_id"]
    assert gid in [g["glossary_id"] for g in api.get("/v1/glossaries").json()["glossaries"]]
    response = api.post("/v1/translate", json={**body, "text": [FRENCH, "Un homme."], "glossary": gid})
    assert response.status_code == 200, response.text
    translation, other = response.json()["translations"]
    assert "katze" in translation["text"]
    [term] = translation["glossary_terms"]
    assert (term["source_span"], term["used"]) == ([3, 8], True)
    assert_terms_consistent(FRENCH, translation["text"], translation["glossary_terms"])
    assert other["glossary_terms"] == []


def test_a_pivot_uses_the_terms_of_markup_in_the_block_that_says_them(api: httpx.Client) -> None:
    """Not in other blocks, and not where a tag says them."""
    gid = create(api, source_lang="fr", entries=[{"source": "chien", "target": "katze"}])["glossary_id"]
    html = f'<p>{FRENCH}</p><p class="chien">Un homme.</p>'
    body = {"text": html, "source_lang": "fr", "target_lang": "de", "format": "html"}
    plain = api.post("/v1/translate", json=body).json()["translations"][0]
    response = api.post("/v1/translate", json={**body, "glossary": gid})
    assert response.status_code == 200, response.text
    translation = response.json()["translations"][0]
    first, second = translation["text"].split("</p>")[:2]
    assert "katze" in first and "katze" not in second
    assert second == plain["text"].split("</p>")[1]
    assert [(t["source"], t["used"]) for t in translation["glossary_terms"]] == [("chien", True)]


def test_the_stream_reports_terms_per_sentence_and_for_the_whole_text(api: httpx.Client) -> None:
    text = "A man walks.  The dog runs in the park.\nA dog sits."
    body = {"text": text, "source_lang": "en", "target_lang": "de", "glossary": {"entries": [TERM]}}
    with connect_sse(api, "POST", "/v1/translate/stream", json=body) as source:
        assert source.response.status_code == 200, source.response.read()
        *sentences, done = [event.json() for event in source.iter_sse()]
    assert [len(s["glossary_terms"]) for s in sentences] == [0, 1, 1]
    for sentence in sentences:
        assert_terms_consistent(sentence["source"], sentence["text"], sentence["glossary_terms"])
    assert [t["source_span"] for t in done["glossary_terms"]] == [[18, 21], [42, 45]]
    assert_terms_consistent(text, done["text"], done["glossary_terms"])
    assert all(t["used"] for t in done["glossary_terms"])
    refused = api.post("/v1/translate/stream", json={**body, "glossary": "no-such-glossary"})
    assert_error(refused, 404, "not_found")


def test_a_file_is_translated_with_a_glossary(api: httpx.Client) -> None:
    gid = create(api)["glossary_id"]
    form = {"target_lang": "de", "source_lang": "en"}
    file = {"file": ("notes.txt", f"{TEXT}\nA man walks.\n".encode())}
    plain = api.post("/v1/translate_file", files=file, data=form)
    with_glossary = api.post("/v1/translate_file", files=file, data={**form, "glossary": gid})
    assert plain.status_code == with_glossary.status_code == 200, with_glossary.text
    assert "katze" not in plain.text and "katze" in with_glossary.text.splitlines()[0]
    assert with_glossary.text.splitlines()[1] == plain.text.splitlines()[1]
    missing = api.post("/v1/translate_file", files=file, data={**form, "glossary": "nope"})
    assert_error(missing, 404, "not_found")


def test_the_openapi_document_shows_the_glossary_routes(api: httpx.Client) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    assert set(paths["/v1/glossaries"]) == {"get", "post"}
    assert set(paths["/v1/glossaries/{glossary_id}"]) == {"get", "patch", "delete"}
    assert set(paths["/v1/glossaries/{glossary_id}/entries"]) == {"put"}
    assert "404" in paths["/v1/translate"]["post"]["responses"]


def test_an_inline_glossary_has_at_most_a_thousand_entries(api: httpx.Client) -> None:
    """Entries sent with a request are checked and indexed with every request; a larger glossary
    is stored, and built once."""
    entries = [{"source": f"term {i}", "target": f"Begriff {i}"} for i in range(MAX_INLINE_ENTRIES)]
    body = {"text": TEXT, "source_lang": "en", "target_lang": "de", "glossary": {"entries": entries}}
    assert api.post("/v1/translate", json=body).status_code == 200
    more = entries + [{"source": "one more", "target": "noch einer"}]
    error = assert_error(api.post("/v1/translate", json=body | {"glossary": {"entries": more}}), 422, "invalid_request")
    assert "1000" in error["message"], error
    assert create(api, entries=more)["entry_count"] == MAX_INLINE_ENTRIES + 1


def test_a_key_keeps_at_most_a_thousand_glossaries(glossary_server: ServiceProcess, data_dir: Path) -> None:
    """Ours answers 403 glossary_limit, DeepL's API 456 (its client's QuotaExceededException);
    after a delete there is room again."""
    key = API_KEYS[1]
    whose = hashlib.sha256(key.encode()).hexdigest()
    mine = httpx.Client(base_url=glossary_server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    client = deepl.Translator(key, server_url=glossary_server.url)
    first = create(mine)["glossary_id"]
    # The rest made directly in the service's database: what is tested is the limit, not the API.
    with closing(sqlite3.connect(data_dir / DATABASE_NAME)) as db, db:
        db.executemany(
            "INSERT INTO glossaries (id, owner, name, source_lang, target_lang, creation_time, entry_count)"
            " VALUES (?, ?, 'filler', 'en', 'de', '2026-01-01T00:00:00.000Z', 0)",
            [(f"filler-{i}", whose) for i in range(MAX_GLOSSARIES - 1)],
        )
    try:
        body = {"name": "one more", "source_lang": "en", "target_lang": "de", "entries": [TERM]}
        assert "1,000" in assert_error(mine.post("/v1/glossaries", json=body), 403, "glossary_limit")["message"]
        with pytest.raises(deepl.QuotaExceededException):
            client.create_glossary("one more", "EN", "DE", {"dog": "Hund"})
        assert mine.delete(f"/v1/glossaries/{first}").status_code == 204
        assert mine.post("/v1/glossaries", json=body).status_code == 201
    finally:
        with closing(sqlite3.connect(data_dir / DATABASE_NAME)) as db, db:
            db.execute("DELETE FROM glossaries WHERE owner = ?", (whose,))
        mine.close()
        client.close()


def test_a_damaged_store_makes_the_server_unready_and_its_routes_503_until_it_is_replaced(
    start_service: StartService,
) -> None:
    """Deleted or corrupted under a running server, the store answered every glossary route 500
    ("no such table") until a restart, with /readyz 200."""
    server = start_service(api_keys=API_KEYS[0])
    database = server.log_path.parent / "data" / DATABASE_NAME
    body = {"name": "a", "source_lang": "en", "target_lang": "de", "entries": [{"source": "dog", "target": "Hund"}]}
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEYS[0]}"}, timeout=60) as api:
        assert api.post("/v1/glossaries", json=body).status_code == 201
        for path in database.parent.glob(f"{DATABASE_NAME}*"):
            path.unlink()
        assert api.get("/readyz").status_code == 200  # deleted: made again, empty
        assert api.get("/v1/glossaries").json()["glossaries"] == []
        database.write_bytes(b"not a database " * 1000)
        unready = assert_error(api.get("/readyz"), 503, "unavailable")
        assert "glossary store" in unready["message"]
        assert_error(api.get("/v1/glossaries"), 503, "unavailable")
        database.unlink()
        assert api.get("/readyz").status_code == 200
        assert api.post("/v1/glossaries", json=body).status_code == 201
