"""The web page in a real browser: Debian's Chromium driven by Playwright, against live services.

The services serve the tiny test models (nonsense translations, real alignments) and, in the last
test, the shipped en->de model, of which it takes the README's screenshot. Every test checks, as it
ends, that the page contacted no host but the service and raised no script error.

``WEB_UI_SCREENSHOT=docs/web-ui.png`` writes the screenshot there (else into a temporary directory).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from live_server import API_KEYS, ServiceProcess, StartService
from playwright.sync_api import Browser, BrowserContext, Download, Locator, Request, Route, expect, sync_playwright
from repo_root import REPO

CHROMIUM = Path("/usr/bin/chromium")
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
MAX_CHARS = 300
DEBOUNCE_MS = 500  # /frontend/settings frontendTimeout
TEXT = "A dog runs in the park."
SENTENCES = "A dog runs in the park. The small girl plays with a red ball.\nA man sits under a tree."
PREFIX = "/mt"


class WebPage:
    """The page of a service in a browser context of its own, with every request it made."""

    def __init__(self, context: BrowserContext, url: str, *, clock: bool = False) -> None:
        self.url = url
        self.page = context.new_page()
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        if clock:  # timers run only when the test advances the clock
            self.page.clock.install()
        self.open()
        if clock:
            self.page.clock.pause_at(self.page.evaluate("Date.now()") + 1000)
        self.text = self.page.get_by_label("Text", exact=True)
        self.output = self.page.locator("#target-text")
        self.message = self.page.locator("#message")

    def open(self) -> None:
        self.page.goto(self.url)
        expect(self.page.locator("form[data-ready]")).to_be_attached()

    def choose(self, source: str, target: str) -> None:
        self.page.get_by_label("From").select_option(source)
        self.page.get_by_label("To").select_option(target)

    def translate(self, text: str) -> None:
        self.text.fill(text)
        self.page.get_by_role("button", name="Translate").click()

    def translation_requests(self) -> list[dict[str, Any]]:
        return [r.post_data_json for r in self.requests if r.method == "POST" and r.url.endswith("/v1/translate")]


OpenPage = Callable[..., WebPage]


def indices(words: Locator) -> list[int]:
    """The word indices (in the alignment's word lists) of the word elements ``words``."""
    found: list[int] = words.evaluate_all("words => words.map((w) => Number(w.dataset.index))")
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"no {CHROMIUM}: scripts/test.sh installs Debian's chromium package")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield browser
        browser.close()


@pytest.fixture
def open_page(browser: Browser) -> Iterator[OpenPage]:
    """``open_page(url, viewport=..., clock=..., **context options)``: a ``WebPage``; on teardown,
    each page must have requested its own service only and raised no script error."""
    opened: list[tuple[BrowserContext, WebPage]] = []

    def open_(url: str, *, viewport: dict[str, int] = DESKTOP, clock: bool = False, **options: Any) -> WebPage:
        context = browser.new_context(viewport=viewport, **options)
        page = WebPage(context, url, clock=clock)
        opened.append((context, page))
        return page

    yield open_
    for context, page in opened:
        context.close()
        hosts = {urlsplit(request.url).netloc for request in page.requests}
        assert hosts == {urlsplit(page.url).netloc}, f"requests to other hosts: {hosts}"
        assert not page.errors, page.errors


@pytest.fixture(scope="module")
def service(start_service: StartService, model_repository: Path) -> ServiceProcess:
    """en->de, de->en, fr->en (so fr->de through a pivot), a model that fails to load (it->en), and
    language identification among languages some of which no model translates from."""
    return start_service(
        model_dir="", models_dir=model_repository, detect_languages="en,de,fr,it,es", max_chars=MAX_CHARS
    )


@pytest.fixture(scope="module")
def keyed_service(start_service: StartService) -> ServiceProcess:
    """API keys required, reached under a path prefix."""
    return start_service(api_keys=API_KEYS[0], root_path=PREFIX)


def api_translation(server: ServiceProcess, *, key: str | None = None, **body: Any) -> dict[str, Any]:
    """What /v1/translate answers for one text."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = httpx.post(f"{server.url}/v1/translate", json=body, headers=headers, timeout=60)
    response.raise_for_status()
    translation: dict[str, Any] = response.json()["translations"][0]
    return translation


def test_typing_translates_once_typing_pauses(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url, clock=True)
    page.choose("en", "de")
    page.text.press_sequentially(TEXT)
    expect(page.page.locator("#char-count")).to_have_text(f"{len(TEXT)} / {MAX_CHARS}")
    page.page.clock.run_for(DEBOUNCE_MS - 100)
    assert page.translation_requests() == []
    page.page.clock.run_for(200)
    expect(page.output).to_have_text(api_translation(service, text=TEXT, source_lang="en", target_lang="de")["text"])
    assert len(page.translation_requests()) == 1


def test_the_button_and_ctrl_enter_translate_at_once(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url, clock=True)  # the debounce timer never fires
    page.choose("en", "de")
    page.translate(TEXT)
    expect(page.output).to_have_text(api_translation(service, text=TEXT, source_lang="en", target_lang="de")["text"])
    other = "A cat sits on the car."
    page.text.fill(other)
    page.text.press("Control+Enter")
    expect(page.output).to_have_text(api_translation(service, text=other, source_lang="en", target_lang="de")["text"])
    assert [r["text"] for r in page.translation_requests()] == [TEXT, other]


def test_swap_changes_the_direction(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    page.choose("en", "de")
    page.translate(TEXT)
    german = api_translation(service, text=TEXT, source_lang="en", target_lang="de")["text"]
    expect(page.output).to_have_text(german)
    page.page.get_by_role("button", name="Swap languages").click()
    expect(page.page.get_by_label("From")).to_have_value("de")
    expect(page.page.get_by_label("To")).to_have_value("en")
    expect(page.text).to_have_value(german)
    expect(page.output).to_have_text(api_translation(service, text=german, source_lang="de", target_lang="en")["text"])
    assert page.translation_requests()[-1]["source_lang"] == "de"
    page.choose("fr", "de")  # German is not translated into French
    expect(page.page.get_by_role("button", name="Swap languages")).to_be_disabled()


def test_the_detected_language_is_shown(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    page.choose("auto", "de")
    page.translate(TEXT)
    expect(page.output).to_have_text(api_translation(service, text=TEXT, target_lang="de")["text"])
    expect(page.page.locator("#detected")).to_contain_text("Detected: English")
    assert "source_lang" not in page.translation_requests()[-1]
    expect(page.page.get_by_role("button", name="Swap languages")).to_be_enabled()  # de->en is served

    page.translate("El perro corre en el parque con los niños.")
    expect(page.message).to_contain_text("seems to be in Spanish, which this service does not translate from")
    expect(page.output).to_be_empty()
    expect(page.page.locator("#detected")).to_have_text("Detected: Spanish")


def test_a_guess_is_marked_and_the_source_fixed_with_one_click(service: ServiceProcess, open_page: OpenPage) -> None:
    """A short German text into English is too short to identify: translated from the likeliest source
    and marked a guess, the target left as chosen (a guess once moved it: "Hallo" guessed English
    became German "Wole."); one click on a language names the source instead."""
    page = open_page(service.url)
    page.choose("auto", "en")
    text = "Zur Kasse"
    page.translate(text)
    guess = api_translation(service, text=text, target_lang="en")
    assert guess["detected_language"]["guessed"] is True
    expect(page.output).to_have_text(guess["text"])
    detected = page.page.locator("#detected")
    expect(detected).to_contain_text("Guessed: ")
    expect(page.page.get_by_label("To")).to_have_value("en")
    fixes = detected.get_by_role("button")
    expect(fixes.first).to_have_text("English")  # the target's language first: a short text is often in it
    fixes.first.click()
    expect(page.page.get_by_label("From")).to_have_value("en")
    expect(page.page.get_by_label("To")).to_have_value("de")
    expect(page.output).to_have_text(api_translation(service, text=text, source_lang="en", target_lang="de")["text"])
    assert page.translation_requests()[-1]["source_lang"] == "en"
    expect(detected).to_have_text("")


def test_a_first_visit_translates_a_text_in_the_default_target_language(
    service: ServiceProcess, open_page: OpenPage
) -> None:
    """Opened fresh (Detect language, the default target), a text in the target language is translated
    into another language instead of coming back unchanged, and the next text, in that other
    language, into the default target again."""
    page = open_page(service.url)
    target = page.page.get_by_label("To")
    expect(page.page.get_by_label("From")).to_have_value("auto")
    default = target.input_value()
    other = {"de": "en", "en": "de"}[default]
    texts = {"en": TEXT, "de": "Ein Hund läuft mit dem Ball im Park."}
    page.translate(texts[default])
    expect(target).to_have_value(other)
    expect(page.output).to_have_text(api_translation(service, text=texts[default], target_lang=other)["text"])
    assert [r["target_lang"] for r in page.translation_requests()] == [default, other]
    page.translate(texts[other])
    expect(target).to_have_value(default)
    expect(page.output).to_have_text(api_translation(service, text=texts[other], target_lang=default)["text"])


def test_the_chosen_target_is_kept_across_visits(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    page.choose("auto", "de")
    page.open()  # the same browser profile, as a later visit
    expect(page.page.get_by_label("To")).to_have_value("de")


def test_hovering_a_word_highlights_the_words_aligned_to_it(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    page.choose("en", "de")
    page.translate(SENTENCES)
    expected = api_translation(service, text=SENTENCES, source_lang="en", target_lang="de", return_alignments=True)
    expect(page.output).to_have_text(expected["text"])
    alignment = expected["alignment"]
    pairs = [tuple(pair) for pair in alignment["word_alignment"]]
    for side, position in (("target", 1), ("source", 0)):
        other = "source" if side == "target" else "target"
        words = page.page.locator(f".word.{side}")
        expect(words).to_have_text(alignment[f"{side}_words"])
        for i in range(len(alignment[f"{side}_words"])):
            words.nth(i).hover()
            aligned = sorted(pair[1 - position] for pair in pairs if pair[position] == i)
            assert sorted(indices(page.page.locator(f".word.{other}.linked"))) == aligned, (side, i)
            assert indices(page.page.locator(f".word.{side}.active")) == [i]
            expect(page.page.locator(".links line.active")).to_have_count(len(aligned))
    expect(page.page.locator(".links line")).to_have_count(len(pairs))
    # Several sentences: no group of linked words spans two of them.
    sentence_of = [0]
    for word in alignment["source_words"][:-1]:
        sentence_of.append(sentence_of[-1] + word.endswith("."))
    groups = page.page.locator(".segment")
    assert groups.count() >= 3
    for g in range(groups.count()):
        words_of_group = indices(groups.nth(g).locator(".word.source"))
        assert len({sentence_of[i] for i in words_of_group}) == 1, words_of_group


def shown_alignment(service: ServiceProcess, page: WebPage, text: str) -> dict:
    """Translate ``text`` en -> de on the page; the alignment the API gives for it."""
    page.choose("en", "de")
    page.translate(text)
    return api_translation(service, text=text, source_lang="en", target_lang="de", return_alignments=True)["alignment"]


def test_words_and_the_heatmap_by_keyboard(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    alignment = shown_alignment(service, page, TEXT)
    expect(page.page.locator(".word.target")).to_have_count(len(alignment["target_words"]))
    focused = page.page.locator(":focus")
    page.page.get_by_role("button", name="Translate").focus()
    for _ in range(10):  # the alternatives, then the words: one tab stop for them all
        page.page.keyboard.press("Tab")
        if focused.evaluate("e => e.classList.contains('word')"):
            break
    expect(focused).to_have_attribute("data-index", "0")
    expect(page.page.locator("#word-readout")).to_contain_text(f"Target word “{alignment['target_words'][0]}”")
    page.page.keyboard.press("ArrowRight")
    expect(focused).to_have_text(alignment["target_words"][1])
    page.page.keyboard.press("ArrowUp")
    source = next(s for s, t in alignment["word_alignment"] if t == 1)
    expect(focused).to_have_text(alignment["source_words"][source])
    expect(focused).to_have_class("word source active")

    page.page.keyboard.press("Tab")
    expect(focused).to_have_id("heatmap")
    readout = page.page.locator("#cell-readout")
    weights = alignment["weights"]
    expect(readout).to_contain_text(f"(row 1) attends to source subword “{alignment['source_tokens'][0]}” (column 1)")
    page.page.keyboard.press("ArrowDown")
    page.page.keyboard.press("ArrowRight")
    page.page.keyboard.press("ArrowRight")
    expect(readout).to_contain_text("(row 2)")
    expect(readout).to_contain_text(f"(column 3) with weight {weights[1][2]:.3f}.")


def test_the_heatmap_under_the_pointer(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    alignment = shown_alignment(service, page, SENTENCES)
    rows, columns = len(alignment["target_tokens"]), len(alignment["source_tokens"])
    canvas = page.page.get_by_role("img", name="Cross-attention heatmap")
    expect(canvas).to_have_attribute(
        "aria-label", f"Cross-attention heatmap: {rows} target subwords by {columns} source subwords"
    )
    box = canvas.bounding_box()
    assert box is not None
    canvas.hover(position={"x": box["width"] - 2, "y": box["height"] - 2})  # the last cell is in the corner
    expect(page.page.locator("#cell-readout")).to_have_text(
        f"Target subword “{alignment['target_tokens'][-1]}” (row {rows}) attends to source subword "
        f"“{alignment['source_tokens'][-1]}” (column {columns}) with weight {alignment['weights'][-1][-1]:.3f}."
    )


def test_alternatives_can_be_chosen(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    page.choose("en", "de")
    page.translate(TEXT)
    expected = api_translation(service, text=TEXT, source_lang="en", target_lang="de", num_hypotheses=3)
    texts = [expected["text"], *(a["text"] for a in expected["alternatives"])]
    choices = page.page.locator("#alternative-list button")
    expect(choices).to_have_text(texts)
    expect(choices.first).to_have_attribute("aria-pressed", "true")
    choices.nth(1).click()
    expect(page.output).to_have_text(texts[1])
    expect(choices.nth(1)).to_have_attribute("aria-pressed", "true")
    expect(choices.first).to_have_attribute("aria-pressed", "false")
    expect(page.page.locator("#alignment-note")).to_have_text("The alignment shown is that of the first translation.")


def test_copy_puts_the_translation_on_the_clipboard(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url, permissions=["clipboard-read", "clipboard-write"])
    page.choose("en", "de")
    page.translate(TEXT)
    expect(page.output).not_to_be_empty()
    page.page.get_by_role("button", name="Copy").click()
    expect(page.page.locator("#copy-status")).to_have_text("Copied")
    assert page.page.evaluate("navigator.clipboard.readText()") == page.output.text_content()


def test_an_oversize_text_gets_a_message_and_no_request(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    page.choose("en", "de")
    page.translate(TEXT)
    expect(page.output).not_to_be_empty()
    oversize = "A dog runs. " * (MAX_CHARS // 12 + 1)
    page.translate(oversize)
    expect(page.message).to_have_text(
        f"The text is {len(oversize)} characters long; this service translates at most {MAX_CHARS} at a time."
    )
    expect(page.page.locator("#char-count")).to_have_class("count over")
    expect(page.text).to_have_attribute("aria-invalid", "true")
    expect(page.output).to_be_empty()
    assert [r["text"] for r in page.translation_requests()] == [TEXT]


@pytest.mark.parametrize(
    ("status", "headers", "message"),
    [
        (429, {"Retry-After": "7"}, "The service is busy. Please try again in 7 s."),
        (504, {}, "The translation took too long and was stopped."),
        (422, {}, "The request failed (422): from the test."),
    ],
)
def test_error_responses_get_clear_messages(
    service: ServiceProcess, open_page: OpenPage, status: int, headers: dict[str, str], message: str
) -> None:
    """The service's answers for these, in its error shape, stood in for by the browser."""
    page = open_page(service.url)
    page.choose("en", "de")

    def refuse(route: Route) -> None:
        body = json.dumps({"error": {"type": "from_the_test", "message": "from the test"}})
        route.fulfill(status=status, headers=headers, content_type="application/json", body=body)

    page.page.route("**/v1/translate", refuse)
    page.translate(TEXT)
    expect(page.message).to_contain_text(message)
    expect(page.output).to_be_empty()


def test_a_model_that_cannot_load_gets_a_message(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    page.choose("it", "en")
    page.translate("Un cane corre nel parco.")
    expect(page.message).to_contain_text("The service cannot translate this right now:")


def test_a_pair_through_a_pivot_is_translated_without_alignment(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    page.choose("fr", "de")
    page.translate(TEXT)
    expect(page.output).to_have_text(api_translation(service, text=TEXT, source_lang="fr", target_lang="de")["text"])
    expect(page.page.locator("#alignment-note")).to_have_text(
        "No alignment: this language pair is translated through an intermediate language."
    )
    expect(page.page.locator("#alignment-views")).to_be_hidden()
    assert [r["return_alignments"] for r in page.translation_requests()] == [True, False]


def test_a_file_is_translated(service: ServiceProcess, open_page: OpenPage, tmp_path: Path) -> None:
    formats = httpx.get(f"{service.url}/frontend/settings").json()["supportedFilesFormat"]
    page = open_page(service.url)
    page.choose("en", "de")
    page.page.get_by_text("Translate a file").click()
    upload = page.page.get_by_label("File", exact=True)
    expect(upload).to_have_attribute("accept", ",".join(formats))
    note, download = translate_note(page, tmp_path)
    expected = httpx.post(
        f"{service.url}/v1/translate_file",
        files={"file": (note.name, note.read_bytes())},
        data={"source_lang": "en", "target_lang": "de"},
        timeout=60,
    )
    assert download.suggested_filename == note.name
    assert Path(download.path()).read_bytes() == expected.content

    slides = tmp_path / "slides.pdf"
    slides.write_bytes(b"%PDF-1.4")
    upload.set_input_files(slides)
    page.page.get_by_role("button", name="Translate the file").click()
    expect(page.page.locator("#file-message")).to_contain_text("This file cannot be translated: unsupported file type")


@pytest.mark.parametrize("path", [f"{PREFIX}/", "/"])  # as a proxy passes the prefix on, or strips it
def test_an_api_key_behind_a_path_prefix(keyed_service: ServiceProcess, open_page: OpenPage, path: str) -> None:
    page = open_page(f"{keyed_service.url}{path}")
    key = page.page.get_by_label("API key")
    expect(key).to_be_visible()
    page.choose("en", "de")
    page.translate(TEXT)
    expect(page.message).to_have_text("This service needs an API key: enter yours in the API key field.")
    key.fill("not-a-key")
    page.page.get_by_role("button", name="Translate").click()
    expect(page.message).to_have_text("The API key was not accepted. Check it and try again.")
    key.fill(API_KEYS[0])
    page.page.get_by_role("button", name="Translate").click()
    expect(page.output).to_have_text(
        api_translation(keyed_service, key=API_KEYS[0], text=TEXT, source_lang="en", target_lang="de")["text"]
    )
    expect(page.message).to_be_empty()
    page.open()
    expect(page.page.get_by_label("API key")).to_have_value(API_KEYS[0])  # remembered by the browser
    paths = {urlsplit(request.url).path for request in page.requests} - {path}
    assert all(p.startswith(f"{PREFIX}/") for p in paths), paths


def test_a_phone_sized_screen(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url, viewport=PHONE, has_touch=True, is_mobile=True)
    page.choose("en", "de")
    page.translate(SENTENCES)
    words = page.page.locator(".word.target")
    expect(words.first).to_be_visible()
    assert page.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    source, target = page.text.bounding_box(), page.output.bounding_box()
    assert source and target and target["y"] >= source["y"] + source["height"]  # one pane below the other
    words.nth(1).tap()
    expect(words.nth(1)).to_have_class("word target active")
    expect(page.page.locator(".word.source.linked")).not_to_have_count(0)


def test_labels_and_contrast(service: ServiceProcess, open_page: OpenPage) -> None:
    page = open_page(service.url)
    page.choose("en", "de")
    page.translate(TEXT)
    page.page.locator(".word.target").nth(1).hover()
    assert unlabelled(page, "select, textarea, input, output, button, canvas") == []
    assert_readable(
        page,
        [
            "h1", "label", ".hint", "#char-count", "a", "output", "#translate",
            "#alternative-list button", ".word", ".word.linked", ".word.active", "#message",
        ],
    )  # fmt: skip


def translate_note(page: WebPage, tmp_path: Path) -> tuple[Path, Download]:
    """Translate a two-line text file into German on the page (its file section open), and
    download the translation."""
    note = tmp_path / "note.txt"
    note.write_text(f"{TEXT}\nA cat sits on the car.\n", encoding="utf-8")
    page.page.get_by_label("File", exact=True).set_input_files(note)
    page.page.get_by_role("button", name="Translate the file").click()
    with page.page.expect_download() as download:
        page.page.get_by_role("link", name="Download note.txt in German").click()
    return note, download.value


def unlabelled(page: WebPage, selector: str) -> list[str]:
    """The controls matching ``selector`` that have no label, aria-label(ledby) or text."""
    return page.page.locator(selector).evaluate_all(
        """controls => controls.filter((c) => !(c.labels?.length || c.getAttribute("aria-label")
             || c.getAttribute("aria-labelledby") || c.textContent.trim())).map((c) => c.outerHTML)"""
    )


def assert_readable(page: WebPage, selectors: list[str]) -> None:
    """The first element of each selector has WCAG AA contrast (4.5) against its first opaque background."""
    colours = page.page.evaluate(
        """selectors => selectors.map((selector) => {
             const element = document.querySelector(selector);
             let background = element;
             while (getComputedStyle(background).backgroundColor === "rgba(0, 0, 0, 0)") {
               background = background.parentElement;
             }
             return [selector, getComputedStyle(element).color, getComputedStyle(background).backgroundColor];
           })""",
        selectors,
    )
    low = [(s, fg, bg, round(contrast(fg, bg), 2)) for s, fg, bg in colours if contrast(fg, bg) < 4.5]
    assert low == [], low


def contrast(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two opaque ``rgb(r, g, b)`` colours."""

    def luminance(colour: str) -> float:
        channels = [int(c) / 255 for c in colour.removeprefix("rgb(").removesuffix(")").split(",")]
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_the_shipped_model_and_the_screenshot(open_page: OpenPage, tmp_path: Path) -> None:
    """The README's screenshot: the shipped en->de model, a word hovered; what the model is good for,
    from its card, on the page and in the start-up log."""
    text = "A man in a blue shirt is riding a bicycle down the street. Two dogs are playing in the snow."
    bundle = REPO / "models" / "en-de" / "bundle"  # its data (the page lists glossaries) not in the checkout
    with ServiceProcess(bundle, tmp_path / "service.log", log_level="info", data_dir=tmp_path / "data") as shipped:
        page = open_page(shipped.url)
        page.choose("en", "de")
        page.translate(text)
        expected = api_translation(shipped, text=text, source_lang="en", target_lang="de")
        expect(page.output).to_have_text(expected["text"])
        note = page.page.locator("#model-note")
        expect(note).to_contain_text("Translated by mt-en-de")
        expect(note).to_contain_text("trained on 29,000 English image captions")
        expect(note).to_contain_text("Serve an OPUS-MT or NLLB model")
        [model] = httpx.get(f"{shipped.url}/v1/models", timeout=10).json()["models"]
        assert model["card"]["trained_on"] in note.inner_text()
        # The whole log: the page's requests, logged at info, push the start-up lines out of its end.
        assert f"model mt-en-de: trained on {model['card']['trained_on']}" in shipped.log(chars=1 << 20)
        page.page.get_by_text("fährt", exact=True).hover()
        expect(page.page.locator(".word.source.linked")).not_to_have_count(0)
        path = Path(os.environ.get("WEB_UI_SCREENSHOT", tmp_path / "web-ui.png"))
        page.page.screenshot(path=path, full_page=True)
    width, height = struct.unpack(">II", path.read_bytes()[16:24])  # the PNG header's IHDR chunk
    assert width == DESKTOP["width"] and height >= DESKTOP["height"] // 2
