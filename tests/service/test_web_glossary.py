"""The web page's glossaries in a real browser (the browser and page fixtures of test_web_browser.py):
one created on the page from pasted lines, chosen among those of the language pair, applied to a
translation whose terms are highlighted in the text and the translation and listed, and deleted.

The service serves the tiny test models, whose translations are nonsense, but a glossary's target
terms are enforced in decoding whatever the model: the page is checked against what the API answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import test_web_browser as web
from live_server import API_KEYS, ServiceProcess, StartService
from playwright.sync_api import Route, expect
from test_web_browser import MAX_CHARS, OpenPage, WebPage, api_translation, assert_readable, translate_note, unlabelled

# The browser and its pages, as test_web_browser.py opens them.
browser = web.browser
open_page = web.open_page

TEXT = "A dog runs in the park."


@pytest.fixture(scope="module")
def service(start_service: StartService, model_repository: Path) -> ServiceProcess:
    """en->de, de->en and fr->en, its glossaries in a directory of its own (start_service's)."""
    return start_service(model_dir="", models_dir=model_repository, max_chars=MAX_CHARS)


@pytest.fixture(scope="module")
def keyed_service(start_service: StartService) -> ServiceProcess:
    return start_service(api_keys=",".join(API_KEYS))


def headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def glossaries(server: ServiceProcess, key: str | None = None) -> list[dict[str, Any]]:
    response = httpx.get(f"{server.url}/v1/glossaries", headers=headers(key), timeout=10)
    response.raise_for_status()
    found: list[dict[str, Any]] = response.json()["glossaries"]
    return found


def create(
    server: ServiceProcess, name: str, source: str, target: str, entries: dict[str, str], key: str | None = None
) -> str:
    """A glossary made through the API; its id."""
    body = {
        "name": name,
        "source_lang": source,
        "target_lang": target,
        "entries": [{"source": s, "target": t} for s, t in entries.items()],
    }
    response = httpx.post(f"{server.url}/v1/glossaries", json=body, headers=headers(key), timeout=10)
    assert response.status_code == 201, response.text
    glossary_id: str = response.json()["glossary_id"]
    return glossary_id


@pytest.fixture(autouse=True)
def no_glossaries(service: ServiceProcess) -> Iterator[None]:
    """Each test starts with no glossary."""
    for glossary in glossaries(service):
        httpx.delete(f"{service.url}/v1/glossaries/{glossary['glossary_id']}", timeout=10).raise_for_status()
    yield


def options(page: WebPage) -> list[str]:
    texts: list[str] = page.page.locator("#glossary option").all_inner_texts()
    return texts


def open_manager(page: WebPage) -> None:
    page.page.get_by_text("Glossaries", exact=True).click()
    expect(page.page.get_by_label("Name", exact=True)).to_be_visible()


def chars(text: str, span: list[int]) -> str:
    """The characters [start, end) of ``text``, as the service counts them (code points)."""
    return text[span[0] : span[1]]


def test_a_glossary_made_on_the_page_is_applied_and_its_terms_shown(
    service: ServiceProcess, open_page: OpenPage
) -> None:
    page = open_page(service.url)
    page.choose("en", "de")
    expect(page.page.get_by_label("Glossary", exact=True)).to_be_disabled()
    expect(page.page.locator("#glossary-hint")).to_contain_text("No glossary for English → German")
    open_manager(page)
    page.page.get_by_label("Name", exact=True).fill("Animals")
    page.page.get_by_label("Terms", exact=True).fill("dog\tdackel\n\nball\tkugel\n")  # as pasted from a sheet
    page.page.get_by_role("button", name="Create glossary").click()
    expect(page.page.locator("#glossary-status")).to_have_text("Created the glossary “Animals” (2 terms).")
    [glossary] = glossaries(service)
    assert (glossary["name"], glossary["source_lang"], glossary["target_lang"]) == ("Animals", "en", "de")
    assert glossary["entry_count"] == 2
    detail = httpx.get(f"{service.url}/v1/glossaries/{glossary['glossary_id']}", timeout=10).json()
    assert [(e["source"], e["target"]) for e in detail["entries"]] == [("dog", "dackel"), ("ball", "kugel")]
    # The new glossary is the one to translate with.
    selector = page.page.get_by_label("Glossary", exact=True)
    expect(selector).to_have_value(glossary["glossary_id"])
    expect(selector.locator("option:checked")).to_have_text("Animals (2 terms)")
    expect(page.page.get_by_label("Name", exact=True)).to_be_empty()

    page.translate(TEXT)
    expected = api_translation(service, text=TEXT, source_lang="en", target_lang="de", glossary=glossary["glossary_id"])
    expect(page.output).to_have_text(expected["text"])
    assert page.translation_requests()[-1]["glossary"] == glossary["glossary_id"]
    [term] = expected["glossary_terms"]
    assert (term["source"], term["target"], term["used"]) == ("dog", "dackel", True)
    # The target term highlighted in the translation, the source term in the text, both listed.
    expect(page.output.locator("mark")).to_have_text([chars(expected["text"], term["target_span"])])
    expect(page.output.locator("mark")).to_have_text(["dackel"], ignore_case=True)
    expect(page.page.locator("#source-marks mark")).to_have_text([chars(TEXT, term["source_span"])])
    expect(page.page.locator("#source-marks mark")).to_have_text(["dog"])
    expect(page.page.locator("#glossary-summary")).to_have_text(
        "The text says 1 glossary term, and the translation uses it."
    )
    expect(page.page.locator("#glossary-used-list li")).to_have_text(["“dog” → “dackel”"])
    expect(page.page.locator("#glossary-unused")).to_be_hidden()
    # The highlights do not change what is copied or swapped: the translation's text.
    assert page.output.evaluate("o => o.textContent") == expected["text"]

    # Edited, the text no longer has the term where it was; with None, no glossary is sent.
    page.text.press("End")
    page.text.press_sequentially(" The cat sits.")
    expect(page.page.locator("#source-marks mark")).to_have_count(0)
    selector.select_option("")
    expect(page.page.locator("#glossary-terms")).to_be_hidden()
    expect(page.output.locator("mark")).to_have_count(0)
    assert "glossary" not in page.translation_requests()[-1]


def test_a_glossary_typed_by_keyboard(service: ServiceProcess, open_page: OpenPage) -> None:
    """A tab moves the focus out of the box, so a typed line separates its terms by " = "."""
    page = open_page(service.url)
    page.choose("en", "de")
    open_manager(page)
    page.page.get_by_label("Name", exact=True).focus()
    keyboard = page.page.keyboard
    keyboard.type("Typed")
    keyboard.press("Tab")
    keyboard.type("Dog = Dackel")
    keyboard.press("Enter")
    keyboard.type("park = garten")
    keyboard.press("Tab")
    keyboard.press("Space")  # Match the source terms' case
    keyboard.press("Tab")
    keyboard.press("Enter")
    expect(page.page.locator("#glossary-status")).to_have_text("Created the glossary “Typed” (2 terms).")
    [sent] = [r.post_data_json for r in page.requests if r.method == "POST" and r.url.endswith("/v1/glossaries")]
    assert sent["entries"] == [
        {"source": "Dog", "target": "Dackel", "case_sensitive": True},
        {"source": "park", "target": "garten", "case_sensitive": True},
    ]
    [glossary] = glossaries(service)
    detail = httpx.get(f"{service.url}/v1/glossaries/{glossary['glossary_id']}", timeout=10).json()
    assert [(e["source"], e["target"]) for e in detail["entries"]] == [("Dog", "Dackel"), ("park", "garten")]


def test_entries_that_make_no_glossary_get_a_message(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    page.choose("en", "de")
    open_manager(page)
    create_button = page.page.get_by_role("button", name="Create glossary")
    create_button.click()
    expect(page.page.locator("#glossary-message")).to_have_text("Name the glossary.")
    expect(page.page.get_by_label("Name", exact=True)).to_be_focused()
    page.page.get_by_label("Name", exact=True).fill("Broken")
    page.page.get_by_label("Terms", exact=True).fill("dog\tdackel\njust one term\n")
    create_button.click()
    expect(page.page.locator("#glossary-message")).to_have_text(
        "Line 2 is not a source term, a tab (or “ = ”) and a target term: “just one term”."
    )
    expect(page.page.get_by_label("Terms", exact=True)).to_be_focused()
    assert not [r for r in page.requests if r.method == "POST" and r.url.endswith("/v1/glossaries")]
    # Entries the service refuses: its reason.
    page.page.get_by_label("Terms", exact=True).fill("dog\tdackel\nDog\tköter\n")
    create_button.click()
    expect(page.page.locator("#glossary-message")).to_contain_text("The glossary was not created: ")
    expect(page.page.locator("#glossary-message")).to_contain_text("duplicate source term")
    expect(page.page.get_by_label("Name", exact=True)).to_have_value("Broken")  # kept, to be corrected
    assert glossaries(service) == []
    # Detect language: a glossary is for one pair, so none is made or chosen.
    page.page.get_by_label("From").select_option("auto")
    expect(create_button).to_be_disabled()
    expect(page.page.get_by_label("Glossary", exact=True)).to_be_disabled()
    expect(page.page.locator("#glossary-hint")).to_contain_text("Choose the language of the text")


def test_the_selector_offers_the_glossaries_of_the_pair(service: ServiceProcess, open_page: OpenPage) -> None:
    english_german = create(service, "Parks", "en", "de", {"park": "garten"})
    create(service, "Hunde", "de", "en", {"hund": "hound"})
    page = open_page(service.url)
    selector = page.page.get_by_label("Glossary", exact=True)
    page.choose("en", "de")
    assert options(page) == ["None", "Parks (1 term)"]
    expect(selector).to_have_value("")
    selector.select_option(label="Parks (1 term)")
    page.choose("de", "en")
    assert options(page) == ["None", "Hunde (1 term)"]
    expect(selector).to_have_value("")
    page.choose("fr", "en")
    assert options(page) == ["None"]
    expect(selector).to_be_disabled()
    expect(page.page.locator("#glossary-hint")).to_have_text(
        "No glossary for French → English: create one under “Glossaries” below."
    )
    # Back to English -> German: its glossary is chosen again, and one made meanwhile is listed.
    create(service, "Later", "en", "de", {"dog": "dackel"})
    page.choose("en", "de")
    expect(selector).to_have_value(english_german)
    expect(selector.locator("option")).to_have_text(["None", "Parks (1 term)", "Later (1 term)"])
    page.translate(TEXT)
    expect(page.output).not_to_be_empty()
    assert page.translation_requests()[-1]["glossary"] == english_german


def test_a_glossary_is_deleted_on_the_page(service: ServiceProcess, open_page: OpenPage) -> None:
    kept = create(service, "Kept", "en", "de", {"park": "garten"})
    gone = create(service, "Gone", "en", "de", {"dog": "dackel"})
    page = open_page(service.url)
    page.choose("en", "de")
    selector = page.page.get_by_label("Glossary", exact=True)
    selector.select_option(gone)
    open_manager(page)
    expect(page.page.locator("#glossary-list li")).to_have_count(2)
    delete = page.page.get_by_role("button", name="Delete the glossary “Gone”")
    delete.click()  # the confirmation dismissed: nothing is deleted
    assert {g["glossary_id"] for g in glossaries(service)} == {kept, gone}
    page.page.once("dialog", lambda dialog: dialog.accept())
    delete.click()
    expect(page.page.locator("#glossary-status")).to_have_text("Deleted the glossary “Gone”.")
    assert [g["glossary_id"] for g in glossaries(service)] == [kept]
    expect(page.page.locator("#glossary-list li")).to_have_count(1)
    expect(page.page.locator("#glossary-list li")).to_contain_text("Kept")
    expect(selector).to_have_value("")
    assert options(page) == ["None", "Kept (1 term)"]
    expect(page.page.locator("#glossary-manager :focus")).to_have_count(1)  # near the button, not lost


def test_terms_the_translation_does_not_use_are_listed(service: ServiceProcess, open_page: OpenPage) -> None:
    """An answer the browser stands in for: a term used twice, one not used, and characters outside
    the Basic Multilingual Plane before them (one character for the service, two in JavaScript)."""
    glossary = create(service, "Stood in", "en", "de", {"dog": "Hund", "ball": "Ball"})
    text = "🐕 A dog, a dog and a ball."
    translation = "🐕 Ein Hund, ein Hund und eine Kugel."
    terms = [
        {"source": "dog", "target": "Hund", "source_span": [4, 7], "target_span": [6, 10], "used": True},
        {"source": "dog", "target": "Hund", "source_span": [11, 14], "target_span": [16, 20], "used": True},
        {"source": "ball", "target": "Ball", "source_span": [21, 25], "target_span": None, "used": False},
    ]
    alternative = {"text": "🐕 Ein Hund, ein Köter und eine Kugel."}

    def answer(route: Route) -> None:
        body = {
            "translations": [
                {"text": translation, "model": "tiny-en-de", "glossary_terms": terms, "alternatives": [alternative]}
            ]
        }
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page = open_page(service.url)
    page.choose("en", "de")
    page.page.get_by_label("Glossary", exact=True).select_option(glossary)
    page.page.route("**/v1/translate", answer)
    page.translate(text)
    expect(page.output).to_have_text(translation)
    assert page.translation_requests()[-1]["glossary"] == glossary
    expect(page.output.locator("mark")).to_have_text(["Hund", "Hund"])
    expect(page.page.locator("#source-marks mark")).to_have_text(["dog", "dog", "ball"])
    expect(page.page.locator("#source-marks")).to_have_text(text + " ")
    expect(page.page.locator("#glossary-summary")).to_have_text(
        "The text says 3 glossary terms; the translation uses 2 of them."
    )
    expect(page.page.locator("#glossary-used-list li")).to_have_text(["“dog” → “Hund” (2 times)"])
    expect(page.page.locator("#glossary-unused-list li")).to_have_text(["“ball” → “Ball”"])
    expect(page.page.locator("#glossary-unused")).to_contain_text("Not used in the translation")
    # An alternative without terms of its own: shown plain, the terms are the translation's.
    page.page.locator("#alternative-list button").nth(1).click()
    expect(page.output).to_have_text(alternative["text"])
    expect(page.output.locator("mark")).to_have_count(0)
    expect(page.page.locator("#glossary-note")).to_have_text(
        "The terms highlighted and listed are those of the first translation."
    )
    page.page.locator("#alternative-list button").nth(0).click()
    expect(page.output.locator("mark")).to_have_count(2)
    expect(page.page.locator("#glossary-note")).to_be_hidden()


def test_the_source_terms_are_marked_under_the_text_itself(service: ServiceProcess, open_page: OpenPage) -> None:
    """The marks lie under the words they mark, on a text that wraps and scrolls in its box."""
    glossary = create(service, "Long", "en", "de", {"ball": "kugel"})
    text = " ".join(["A small girl plays with a red ball in the park."] * 5)
    page = open_page(service.url)
    page.choose("en", "de")
    page.page.get_by_label("Glossary", exact=True).select_option(glossary)
    page.translate(text)
    expected = api_translation(service, text=text, source_lang="en", target_lang="de", glossary=glossary)
    expect(page.output).to_have_text(expected["text"])
    marks = page.page.locator("#source-marks mark")
    expect(marks).to_have_count(5)
    page.text.evaluate("t => { t.style.height = '6rem'; t.scrollTop = t.scrollHeight; }")
    page.page.wait_for_function(
        "() => document.getElementById('source-marks').scrollTop === document.getElementById('source-text').scrollTop"
    )
    # The layer lays its text out as the box does: same font, box, wrapping and room for a scroll bar.
    properties = ["font", "padding", "borderWidth", "boxSizing", "whiteSpace", "overflowWrap", "lineHeight",
                  "letterSpacing", "wordSpacing", "tabSize", "scrollbarGutter"]  # fmt: skip
    layer, box = (
        page.page.locator(selector).evaluate(
            "(e, properties) => [e.clientWidth, e.clientHeight, ...properties.map((p) => getComputedStyle(e)[p])]",
            properties,
        )
        for selector in ("#source-marks", "#source-text")
    )
    assert layer == box
    # The last mark, scrolled into the box with the text.
    outer = page.text.bounding_box()
    mark = marks.last.bounding_box()
    assert outer and mark and outer["y"] <= mark["y"] and mark["y"] + mark["height"] <= outer["y"] + outer["height"]


def test_a_file_is_translated_with_the_glossary_chosen(
    service: ServiceProcess, open_page: OpenPage, tmp_path: Path
) -> None:
    glossary = create(service, "Animals", "en", "de", {"dog": "dackel"})
    page = open_page(service.url)
    page.choose("en", "de")
    page.page.get_by_label("Glossary", exact=True).select_option(glossary)
    page.page.get_by_text("Translate a file").click()
    note, download = translate_note(page, tmp_path)
    expected = httpx.post(
        f"{service.url}/v1/translate_file",
        files={"file": (note.name, note.read_bytes())},
        data={"source_lang": "en", "target_lang": "de", "glossary": glossary},
        timeout=60,
    )
    expected.raise_for_status()
    translated = Path(download.path()).read_bytes()
    assert translated == expected.content
    assert b"dackel" in translated.lower()
    without = httpx.post(
        f"{service.url}/v1/translate_file",
        files={"file": (note.name, note.read_bytes())},
        data={"source_lang": "en", "target_lang": "de"},
        timeout=60,
    )
    assert b"dackel" not in without.content.lower()  # the glossary's doing


def test_glossaries_belong_to_the_api_key(keyed_service: ServiceProcess, open_page: OpenPage) -> None:
    create(keyed_service, "Mine", "en", "de", {"dog": "dackel"}, key=API_KEYS[0])
    create(keyed_service, "Theirs", "en", "de", {"dog": "dackel"}, key=API_KEYS[1])
    page = open_page(keyed_service.url)
    page.choose("en", "de")
    expect(page.page.locator("#glossary-hint")).to_have_text("Enter your API key to use your glossaries.")
    key = page.page.get_by_label("API key")
    key.fill(API_KEYS[0])
    key.press("Tab")  # the key's glossaries are listed once it is entered
    expect(page.page.get_by_label("Glossary", exact=True).locator("option")).to_have_text(["None", "Mine (1 term)"])
    open_manager(page)
    expect(page.page.locator("#glossary-list li")).to_have_count(1)


def test_the_glossary_controls_are_labelled_and_legible(service: ServiceProcess, open_page: OpenPage) -> None:
    glossary = create(service, "Animals", "en", "de", {"dog": "dackel"})
    page = open_page(service.url)
    page.choose("en", "de")
    page.page.get_by_label("Glossary", exact=True).select_option(glossary)
    open_manager(page)
    page.translate(TEXT)
    expect(page.output.locator("mark")).not_to_have_count(0)
    controls = "#glossary-row select, #glossary-manager input, #glossary-manager textarea, #glossary-manager button"
    assert unlabelled(page, controls) == []
    assert_readable(
        page,
        ["#target-text mark", "#glossary-used-list mark", "#glossary-hint", "#glossary-list button", "#source-text"],
    )
