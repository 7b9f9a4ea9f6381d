"""DeepL's API v2: the official ``deepl`` client against a real service, pointed at it by its URL.

The service serves tiny en->de and de->en models (relabelled copies of one): every translation is
compared with what /v1 answers for the same request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import deepl
import docx
import httpx
import pytest
from live_server import API_KEYS, ServiceProcess, StartService

from service.app import FILES_DIRECTORY
from service.routes.deepl import CHARACTER_LIMIT, _preserve_formatting
from tests.conftest import both_ways

TEXT = "A dog runs in the park."
GERMAN = "Ein Hund läuft im Park."
HTML = "<p>A <b>man</b> rides a bike.</p>"


@pytest.fixture(scope="module")
def deepl_server(
    start_service: StartService, tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory
) -> ServiceProcess:
    root = tmp_path_factory.mktemp("deepl_repository")
    both_ways(tiny_bundle, root)
    data = tmp_path_factory.mktemp("deepl_data")
    return start_service(
        model_dir="", models_dir=root, api_keys=",".join(API_KEYS), data_dir=data, max_texts=8, max_wait_ms=2
    )


@pytest.fixture(scope="module")
def translator(deepl_server: ServiceProcess) -> Iterator[deepl.Translator]:
    client = deepl.Translator(API_KEYS[0], server_url=deepl_server.url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def native(deepl_server: ServiceProcess) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {API_KEYS[0]}"}
    with httpx.Client(base_url=deepl_server.url, headers=headers, timeout=60) as client:
        yield client


def v1(native: httpx.Client, texts: list[str], target: str, source: str | None = None, **options: object) -> list[str]:
    response = native.post(
        "/v1/translate", json={"text": texts, "source_lang": source or "auto", "target_lang": target, **options}
    )
    assert response.status_code == 200, response.text
    return [t["text"] for t in response.json()["translations"]]


def test_translate_one_text(translator: deepl.Translator, native: httpx.Client) -> None:
    result = translator.translate_text(TEXT, source_lang="EN", target_lang="DE")
    assert result.text == v1(native, [TEXT], "de", "en")[0]
    assert result.detected_source_lang == "EN"
    assert result.billed_characters == len(TEXT)


def test_translate_a_list_with_the_source_identified(translator: deepl.Translator, native: httpx.Client) -> None:
    texts = [TEXT, "Two children play in the sand."]
    results = translator.translate_text(texts, target_lang="DE")
    assert [r.text for r in results] == v1(native, texts, "de")
    assert [r.detected_source_lang for r in results] == ["EN", "EN"]


@pytest.mark.parametrize("target", ["EN-GB", "EN-US", "en-gb"])
def test_regional_targets_are_served_by_the_model_of_their_language(
    translator: deepl.Translator, native: httpx.Client, target: str
) -> None:
    result = translator.translate_text(GERMAN, source_lang="DE", target_lang=target)
    assert result.text == v1(native, [GERMAN], "en", "de")[0]
    assert result.detected_source_lang == "DE"


def test_html_keeps_its_tags_through_the_markup_path(translator: deepl.Translator, native: httpx.Client) -> None:
    result = translator.translate_text(HTML, source_lang="EN", target_lang="DE", tag_handling="html")
    assert result.text == v1(native, [HTML], "de", "en", format="html")[0]
    assert result.text.startswith("<p>") and "<b>" in result.text


def test_options_that_cannot_be_honoured_are_accepted(translator: deepl.Translator, native: httpx.Client) -> None:
    result = translator.translate_text(
        TEXT,
        source_lang="EN",
        target_lang="DE",
        formality="prefer_more",
        context="A text about dogs.",
        model_type="quality_optimized",
        split_sentences="nonewlines",
        outline_detection=False,
        ignore_tags=["x"],
    )
    assert result.text == v1(native, [TEXT], "de", "en")[0]


def test_form_body_with_repeated_text(native: httpx.Client) -> None:
    response = native.post(
        "/v2/translate",
        data={"text": [TEXT, GERMAN], "source_lang": "EN", "target_lang": "DE", "preserve_formatting": "1"},
        headers={"Authorization": f"DeepL-Auth-Key {API_KEYS[1]}"},
    )
    assert response.status_code == 200, response.text
    translations = response.json()["translations"]
    assert [t["detected_source_language"] for t in translations] == ["EN", "EN"]
    assert len(translations) == 2 and all(set(t) == {"detected_source_language", "text"} for t in translations)


def test_a_form_body_with_utf8_sent_as_it_is_reads_as_utf8(native: httpx.Client) -> None:
    """``curl -d 'text=Straße…'`` sends its bytes unescaped: they are UTF-8, as DeepL reads them."""
    text = "🐕 → ½ © https://de.wikipedia.org/wiki/Straße"  # passed through: comes back as it was read
    response = native.post(
        "/v2/translate",
        content=f"text={text}&source_lang=EN&target_lang=DE".encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 200, response.text
    assert [t["text"] for t in response.json()["translations"]] == [text]


@pytest.mark.parametrize(
    ("source", "translated", "kept"),
    [
        ("a dog runs", "Ein Hund läuft.", "ein Hund läuft"),
        ("A dog runs.", "Ein Hund läuft.", "Ein Hund läuft."),
        (" a dog\n", " Ein Hund.\n", " ein Hund\n"),
        ("42 dogs", "42 Hunde!", "42 Hunde"),
        ("dog", "", ""),
    ],
)
def test_preserve_formatting(source: str, translated: str, kept: str) -> None:
    assert _preserve_formatting(source, translated) == kept


def test_languages(translator: deepl.Translator) -> None:
    assert {(lang.code, lang.name) for lang in translator.get_source_languages()} == {
        ("EN", "English"),
        ("DE", "German"),
    }
    targets = translator.get_target_languages()
    assert {lang.code for lang in targets} == {"DE", "EN-GB", "EN-US"}
    assert {lang.name for lang in targets} == {"German", "English (British)", "English (American)"}
    assert not any(lang.supports_formality for lang in targets)


def test_usage_counts_the_characters_translated(translator: deepl.Translator) -> None:
    before = translator.get_usage().character
    assert before.limit == CHARACTER_LIMIT and not before.limit_reached
    translator.translate_text([TEXT, "A cat."], source_lang="EN", target_lang="DE")
    assert translator.get_usage().character.count == before.count + len(TEXT) + len("A cat.")


@pytest.mark.parametrize(
    ("name", "content"),
    [("story.txt", f"{TEXT}\n\nTwo children play in the sand.\n"), ("page.html", f"<html><body>{HTML}</body></html>")],
)
def test_translate_document(
    translator: deepl.Translator, native: httpx.Client, tmp_path: Path, name: str, content: str
) -> None:
    source, translated = tmp_path / name, tmp_path / f"translated-{name}"
    source.write_text(content, encoding="utf-8")
    status = translator.translate_document_from_filepath(source, translated, source_lang="EN", target_lang="DE")
    expected = native.post(
        "/v1/translate_file", files={"file": (name, content.encode())}, data={"source_lang": "en", "target_lang": "de"}
    )
    assert expected.status_code == 200, expected.text
    assert translated.read_bytes() == expected.content
    assert status.done and status.billed_characters and status.billed_characters > 0


def test_a_document_is_downloaded_once_and_with_its_key(
    translator: deepl.Translator, deepl_server: ServiceProcess
) -> None:
    handle = translator.translate_document_upload(TEXT.encode(), filename="a.txt", target_lang="DE")
    other = deepl.DocumentHandle(handle.document_id, "0" * 64)
    with pytest.raises(deepl.DeepLException) as wrong_key:
        translator.translate_document_get_status(other)
    assert wrong_key.value.http_status_code == 404
    assert translator.translate_document_wait_until_done(handle).done
    assert translator.translate_document_download(handle).content  # type: ignore[union-attr]
    with pytest.raises(deepl.DeepLException) as gone:
        translator.translate_document_get_status(handle)
    assert gone.value.http_status_code == 404


def test_a_document_bills_its_text_and_is_deleted_from_disk_once_downloaded(
    start_service: StartService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = start_service(file_expiry_s=600, data_dir=str(tmp_path / "data"))
    store = tmp_path / "data" / FILES_DIRECTORY  # where the server keeps files, without MT_DATABASE_URL
    word = docx.Document()
    paragraph = word.add_paragraph("A man with a ")
    paragraph.add_run("red").bold = True
    paragraph.add_run(" hat walks.")
    source = tmp_path / "hat.docx"
    word.save(str(source))
    client = deepl.Translator("any", server_url=server.url)
    handle = client.translate_document_upload(source.read_bytes(), filename=source.name, target_lang="DE")
    status = client.translate_document_wait_until_done(handle)
    # The runs' text, not the <span>s each group of runs was translated in.
    assert status.billed_characters == len("A man with a red hat walks.")
    assert len(list(store.iterdir())) == 1  # the translation; the upload is gone
    assert client.translate_document_download(handle).content  # type: ignore[union-attr]
    client.close()
    assert list(store.iterdir()) == []  # not kept for MT_FILE_EXPIRY_S: it cannot be downloaded again


def test_document_errors(translator: deepl.Translator) -> None:
    with pytest.raises(deepl.DeepLException) as unsupported:
        translator.translate_document_upload(b"%PDF", filename="a.pdf", target_lang="DE")
    assert unsupported.value.http_status_code == 400
    with pytest.raises(deepl.DeepLException) as language:
        translator.translate_document_upload(b"A dog.", filename="a.txt", target_lang="FR")
    assert language.value.http_status_code == 400


def test_glossaries(translator: deepl.Translator, deepl_server: ServiceProcess, native: httpx.Client) -> None:
    assert {(p.source_lang, p.target_lang) for p in translator.get_glossary_languages()} == {
        ("en", "de"),
        ("de", "en"),
    }
    entries = {"dog": "katze", "park": "Park"}  # the tiny model translates "dog" into anything but "katze"
    created = translator.create_glossary("animals", source_lang="EN", target_lang="DE", entries=entries)
    assert (created.name, created.source_lang, created.target_lang, created.entry_count) == ("animals", "EN", "DE", 2)
    assert created.ready
    assert created.glossary_id in [g.glossary_id for g in translator.list_glossaries()]
    fetched = translator.get_glossary(created.glossary_id)
    assert (fetched.glossary_id, fetched.name, fetched.creation_time) == (
        created.glossary_id,
        created.name,
        created.creation_time,
    )
    assert translator.get_glossary_entries(created) == entries

    # Applied to a translation of its languages, refused with any other.
    assert "katze" not in translator.translate_text(TEXT, source_lang="EN", target_lang="DE").text
    assert "katze" in translator.translate_text(TEXT, source_lang="EN", target_lang="DE", glossary=created).text
    body = {"text": [TEXT], "target_lang": "DE", "glossary_id": created.glossary_id}  # DeepL requires source_lang
    assert native.post("/v2/translate", json=body).status_code == 400
    with pytest.raises(deepl.DeepLException) as mismatched:
        translator.translate_text(GERMAN, source_lang="DE", target_lang="EN-GB", glossary=created.glossary_id)
    assert mismatched.value.http_status_code == 400

    # Another key's glossaries are not this key's.
    other = deepl.Translator(API_KEYS[1], server_url=deepl_server.url)
    assert created.glossary_id not in [g.glossary_id for g in other.list_glossaries()]
    with pytest.raises(deepl.GlossaryNotFoundException):
        other.get_glossary(created.glossary_id)

    translator.delete_glossary(created)
    assert created.glossary_id not in [g.glossary_id for g in translator.list_glossaries()]
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.get_glossary(created.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.delete_glossary(created.glossary_id)
    with pytest.raises(deepl.DeepLException) as unknown:
        translator.translate_text(TEXT, source_lang="EN", target_lang="DE", glossary=created.glossary_id)
    assert unknown.value.http_status_code == 400


def test_a_document_with_a_glossary(translator: deepl.Translator, tmp_path: Path) -> None:
    created = translator.create_glossary("document", source_lang="EN", target_lang="DE", entries={"dog": "katze"})
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text(f"{TEXT}\n")
    translator.translate_document_from_filepath(source, target, source_lang="EN", target_lang="DE", glossary=created)
    assert "katze" in target.read_text()
    translator.delete_glossary(created)


def test_glossary_from_csv_and_invalid_entries(translator: deepl.Translator) -> None:
    created = translator.create_glossary_from_csv("csv", "DE", "EN", csv_data='Hund,dog\n"Park, groß",big park\n')
    assert translator.get_glossary_entries(created) == {"Hund": "dog", "Park, groß": "big park"}
    translator.delete_glossary(created)
    for csv_data in ("Hund,dog\nHund,hound\n", "Hund,dog\nHUND,hound\n", "Hund,\n", ""):
        with pytest.raises(deepl.DeepLException) as invalid:
            translator.create_glossary_from_csv("bad", "DE", "EN", csv_data=csv_data)
        assert invalid.value.http_status_code == 400
    with pytest.raises(deepl.DeepLException) as pair:
        translator.create_glossary("pair", "EN", "FR", {"dog": "chien"})
    assert pair.value.http_status_code == 400


def test_glossary_csv_rows_name_their_languages(translator: deepl.Translator) -> None:
    # DeepL's CSV may give each row's languages after its terms; a row for another pair is ignored.
    rows = "dog,katze,EN,DE\ncat,Hund,en,de\nfox,Fuchs,fr,de\nbird,Vogel,en,en\nmouse,Maus,En,dE,0.87\n"
    created = translator.create_glossary_from_csv("languages", "EN", "DE", csv_data=rows)
    assert created.entry_count == 3
    assert translator.get_glossary_entries(created) == {"dog": "katze", "cat": "Hund", "mouse": "Maus"}
    translator.delete_glossary(created)


@pytest.mark.parametrize(
    ("csv_data", "entry"),
    [
        ("cat,Katze,fr,es\n", 1),
        ("cat,Katze,de,de\n", 1),  # another source
        ("dog,katze,en,fr\ncat,Katze,EN,EN\n", 1),  # another target
        ("dog,katze\ncat,Katze,en\n", 2),  # three fields
    ],
)
def test_glossary_csv_with_no_row_for_its_languages_is_refused(
    translator: deepl.Translator, csv_data: str, entry: int
) -> None:
    before = len(translator.list_glossaries())
    with pytest.raises(deepl.DeepLException) as refused:
        translator.create_glossary_from_csv("other", "EN", "DE", csv_data=csv_data)
    assert refused.value.http_status_code == 400
    assert f"entry {entry}: " in str(refused.value)
    assert len(translator.list_glossaries()) == before


def test_glossary_tsv_has_no_language_columns(translator: deepl.Translator) -> None:
    created = translator.create_glossary("tsv", "EN", "DE", entries={"dog,fr": "katze,es"})
    assert translator.get_glossary_entries(created) == {"dog,fr": "katze,es"}
    translator.delete_glossary(created)


def test_a_bad_key_is_refused(deepl_server: ServiceProcess) -> None:
    with pytest.raises(deepl.AuthorizationException):
        deepl.Translator("not-a-key", server_url=deepl_server.url).translate_text(TEXT, target_lang="DE")
    with pytest.raises(deepl.AuthorizationException):
        deepl.Translator("not-a-key", server_url=deepl_server.url).get_usage()


def test_an_unknown_language_is_refused(translator: deepl.Translator) -> None:
    with pytest.raises(deepl.DeepLException) as target:
        translator.translate_text(TEXT, target_lang="FR")
    assert target.value.http_status_code == 400
    with pytest.raises(deepl.DeepLException) as source:
        translator.translate_text(TEXT, source_lang="JA", target_lang="DE")
    assert source.value.http_status_code == 400


def test_a_glossary_id_no_glossary_has_is_not_echoed_whole(native: httpx.Client) -> None:
    """500 KB of glossary_id came back in a 500 KB answer."""
    headers = {"Authorization": f"DeepL-Auth-Key {API_KEYS[0]}"}
    body = {"text": [TEXT], "source_lang": "EN", "target_lang": "DE", "glossary_id": "x" * 500_000}
    response = native.post("/v2/translate", json=body, headers=headers)
    assert response.status_code == 400 and len(response.content) < 1000, response.text[:200]
    assert "of 500000 characters" in response.json()["message"]


def test_errors_in_deepl_shape(native: httpx.Client) -> None:
    headers = {"Authorization": f"DeepL-Auth-Key {API_KEYS[0]}"}
    cases = [
        ({"json": {"target_lang": "DE"}}, 400),  # no text
        ({"json": {"text": [TEXT], "target_lang": "DE", "formality": "rude"}}, 400),
        ({"json": {"text": [TEXT], "target_lang": "DE", "tag_handling": "pdf"}}, 400),
        ({"content": b'{"text": ', "headers": {**headers, "Content-Type": "application/json"}}, 400),
        # nested past the JSON parser's recursion limit: was a 500
        (
            {
                "content": b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                "headers": {**headers, "Content-Type": "application/json"},
            },
            400,
        ),
        ({"json": {"text": ["a"] * 9, "target_lang": "DE"}}, 413),
        ({"json": {"text": ["<p>a</b>"], "target_lang": "DE", "tag_handling": "xml"}}, 400),
        # html.parser's own assertion on a "<![" it cannot read: was a 500
        ({"json": {"text": ["<p>A dog.</p><![<![x"], "target_lang": "DE", "tag_handling": "html"}}, 400),
        # a variant DeepL does not name is no language, not its prefix's
        ({"json": {"text": [TEXT], "target_lang": "DE-XX"}}, 400),
        ({"json": {"text": [TEXT], "target_lang": "DE-"}}, 400),
        ({"json": {"text": [TEXT], "source_lang": "EN-XX", "target_lang": "DE"}}, 400),
    ]
    for kwargs, status in cases:
        response = native.post("/v2/translate", **{"headers": headers, **kwargs})
        assert response.status_code == status, (kwargs, response.text)
        assert set(response.json()) == {"message"} and response.json()["message"]
    for method, path in [("GET", "/v2/nothing"), ("POST", "/v2/glossaries/x/y/z"), ("GET", "/v2/glossaries/nope")]:
        response = native.request(method, path, headers=headers)
        assert response.status_code == 404, (path, response.text)
        assert set(response.json()) == {"message"}
    response = native.get("/v2/usage", headers={"Authorization": "DeepL-Auth-Key wrong"})
    assert response.status_code == 403 and set(response.json()) == {"message"}
    response = native.get("/v2/languages", headers={"Authorization": ""})
    assert response.status_code == 403
