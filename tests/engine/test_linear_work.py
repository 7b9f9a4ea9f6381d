"""Linear work and bounded output wherever input is parsed or written: each document format's reader
and writer (.txt, .md, .html, .srt, .docx) and the markup (HTML, XML) and insets of /v1/translate,
fed a shape an attacker would choose at a size n and at 4n.

Work is this thread's CPU time with the cyclic garbage collector paused, the best of three
runs, at an n large enough for milliseconds to be measured: linear work grows about 4x from n to
4n, quadratic 16x; the bound, 8x, leaves room for n log n and for a loaded machine's noise. The
thread's, not the process's: in the suite's process, threads that other tests leave running (a
pool's, a server's) count in the process's CPU time (9.3x was seen that way for the XML CDATA
shape, which measures 3.8-5.5x alone). The collector is paused since its full collections are
proportional to the whole live heap, not to the work of the code under test. A writer is given
its reader's texts as their own translations (markup with a word-for-word alignment), so that
its output can be held against its input: it grows as the input does, within twice it and 1 MiB
(the bound on what Markdown's references write out)."""

from __future__ import annotations

import gc
import io
import time
from collections.abc import Callable

import docx
import pytest

from engine import insets
from engine.documents import read_document
from engine.markup.document import Document, Translation
from engine.markup.projection import WordAlignment

GROWTH_BOUND = 8.0
OUTPUT_BOUND = (2, 1 << 20)  # output bytes at most 2 x input + 1 MiB
MEASURABLE_S = 0.02  # the run at n takes at least this much CPU time
Run = Callable[[int], tuple[int, int]]  # n -> (output bytes, input bytes)


def word_file(build: Callable[[docx.document.Document], None]) -> bytes:
    document = docx.Document()
    build(document)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def word_paragraphs(n: int) -> bytes:
    return word_file(lambda d: [d.add_paragraph("A dog runs.") for _ in range(n)])


def word_runs(n: int) -> bytes:
    """One paragraph of n runs, each formatted otherwise than its neighbours."""

    def build(d: docx.document.Document) -> None:
        paragraph = d.add_paragraph()
        for i in range(n):
            run = paragraph.add_run("dog runs " if i % 3 else "fast. ")
            run.bold, run.italic, run.underline = i % 2 == 0, i % 3 == 0, i % 5 == 0

    return word_file(build)


def word_table(n: int) -> bytes:
    def build(d: docx.document.Document) -> None:
        for row in d.add_table(rows=n, cols=2).rows:
            row.cells[0].text, row.cells[1].text = "dog", "cat"

    return word_file(build)


def subtitles(n: int) -> bytes:
    return b"".join(b"%d\n00:00:01,000 --> 00:00:02,000\nA dog runs.\n\n" % i for i in range(1, n + 1))


FILES: dict[str, tuple[str, Callable[[int], bytes]]] = {
    "txt lines": ("a.txt", lambda n: b"A dog runs.\n" * n),
    "txt one line": ("a.txt", lambda n: b"A dog runs. " * n),
    "md paragraphs": ("a.md", lambda n: b"A dog runs.\n\n" * n),
    "md emphasis": ("a.md", lambda n: b"*dog* " * n),
    "md stars": ("a.md", lambda n: b"*" * n + b"a" + b"*" * n),
    "md mixed emphasis": ("a.md", lambda n: b"*_" * n + b"a"),
    "md brackets": ("a.md", lambda n: b"[" * n + b"a"),
    "md backticks": ("a.md", lambda n: b"`a " * n),
    "md less-than": ("a.md", lambda n: b"< " * n),
    "md links": ("a.md", lambda n: b"[dog](http://e.com/) " * n),
    "md images": ("a.md", lambda n: b"![dog](http://e.com/d.png) " * n),
    "md autolinks": ("a.md", lambda n: b"<http://e.com/a> " * n),
    "md inline html": ("a.md", lambda n: b"<b>dog</b> " * n),
    "md one reference": ("a.md", lambda n: b"[r]: http://e.com/\n\n" + b"![][r] " * n),
    "md references": (
        "a.md",
        lambda n: (
            b"".join(b"[%d]: http://e.com/%d\n" % (i, i) for i in range(n))
            + b"\n"
            + b"".join(b"[d][%d] " % i for i in range(n))
        ),
    ),
    "md list": ("a.md", lambda n: b"- A dog runs.\n" * n),
    "md headings": ("a.md", lambda n: b"# A dog runs.\n" * n),
    "md table rows": ("a.md", lambda n: b"| a | b |\n|---|---|\n" + b"| dog | cat |\n" * n),
    "md table columns": ("a.md", lambda n: b"|" + b" a |" * n + b"\n|" + b"---|" * n + b"\n|" + b" dog |" * n + b"\n"),
    "html paragraphs": ("a.html", lambda n: b"<p>A dog runs.</p>" * n),
    "html less-than": ("a.html", lambda n: b"<p>A dog runs.</p>" + b"< " * n),
    "html inline": ("a.html", lambda n: b"<p>" + b"A <a href='/x'>dog</a> runs. " * n + b"</p>"),
    "html unclosed": ("a.html", lambda n: b"<p>dog " * n),
    "html lines": ("a.html", lambda n: b"<p><b>" + b"dog<br>" * n + b"</b></p>"),
    "html comments": ("a.html", lambda n: b"<p>dog<!-- x --></p>" * n),
    "html attributes": ("a.html", lambda n: b"<p>" + b'<img alt="dog" title="cat">' * n + b"</p>"),
    "html table": ("a.html", lambda n: b"<table>" + b"<tr><td>dog</td><td>cat</td></tr>" * n + b"</table>"),
    "html scripts": ("a.html", lambda n: b"<script>var a = 1 < 2;</script>" * n),
    "srt cues": ("a.srt", subtitles),
    "srt one cue": ("a.srt", lambda n: b"1\n00:00:01,000 --> 00:00:02,000\n" + b"A dog runs.\n" * n + b"\n"),
    "docx paragraphs": ("a.docx", word_paragraphs),
    "docx runs": ("a.docx", word_runs),
    "docx table": ("a.docx", word_table),
}

MARKUP: dict[str, tuple[str, Callable[[int], str]]] = {
    "html sentences": ("html", lambda n: "<p>" + "A <b>dog</b> runs. " * n + "</p>"),
    "html elements in a sentence": ("html", lambda n: "<p>A " + "<b>dog</b> " * n + "runs.</p>"),
    "html lines": ("html", lambda n: "<p><b>" + "A dog runs.<br>" * n + "</b></p>"),
    "html insets": ("html", lambda n: "<p>" + "dog http://e.com/a ★ " * n + "</p>"),
    "html attributes": ("html", lambda n: "<p>dog" + '<img alt="a dog">' * n + "</p>"),
    "html kept": ("html", lambda n: "<p>" + 'A <code>x</code> <span translate="no">X</span> dog. ' * n + "</p>"),
    "html entities": ("html", lambda n: "<p>" + "dog&nbsp;&lt; " * n + "</p>"),
    "xml elements": ("xml", lambda n: "<doc>" + "<s>A <i>dog</i> runs.</s>" * n + "</doc>"),
    "xml elements in a sentence": ("xml", lambda n: "<s>A " + "<i>dog</i> " * n + "</s>"),
    "xml lines": ("xml", lambda n: "<s><i>" + "A dog<br/>" * n + "</i></s>"),
    "xml cdata": ("xml", lambda n: "<s>dog<![CDATA[" + "a < b\n" * n + "]]></s>"),
    "xml attributes": ("xml", lambda n: "<s>dog" + '<i title="a dog"/>' * n + "</s>"),
}

INSETS: dict[str, Callable[[int], str]] = {
    "symbols": lambda n: "dog ★ " * n,
    "addresses": lambda n: "dog http://e.com/a a@b.com " * n,
    "symbols together": lambda n: "dog " + "★ ™ " * n + "cat",
}


def word_for_word(text: str) -> WordAlignment:
    alignment = WordAlignment()
    alignment.add(text, 0, text, 0, None)
    return alignment


def file_run(filename: str, make: Callable[[int], bytes]) -> Run:
    def run(n: int) -> tuple[int, int]:
        data = make(n)
        document = read_document(data, filename, max_bytes=1 << 30, max_texts=1 << 30)
        return len(document.write(document.texts)), len(data)

    return run


def markup_run(kind: str, make: Callable[[int], str]) -> Run:
    def run(n: int) -> tuple[int, int]:
        text = make(n)
        document = Document(text, kind)  # type: ignore[arg-type]
        rendered = document.render([Translation(unit, word_for_word(unit)) for unit in document.units])
        return len(rendered.encode()), len(text.encode())

    return run


def insets_run(make: Callable[[int], str]) -> Run:
    def run(n: int) -> tuple[int, int]:
        sentence = make(n)
        stripped = insets.take_out(sentence)
        assert stripped is not None
        return len(stripped.put_back(stripped.words, word_for_word(stripped.words)).encode()), len(sentence.encode())

    return run


def work(run: Run, n: int, *, runs: int = 3) -> tuple[float, tuple[int, int]]:
    """The least CPU time of ``runs`` runs at ``n``, the collector paused, and the run's sizes."""
    best = float("inf")
    gc.disable()  # not collected first: in the suite's process a full collection of its heap cost more than the runs
    try:
        for _ in range(runs):
            started = time.thread_time()
            sizes = run(n)
            best = min(best, time.thread_time() - started)
    finally:
        gc.enable()
    return best, sizes


def assert_linear(run: Run) -> None:
    n = 64
    while work(run, n, runs=1)[0] < MEASURABLE_S and n < 1 << 22:
        n *= 2
    (at_n, (out_n, _)), (at_4n, (out_4n, in_4n)) = work(run, n), work(run, 4 * n)
    assert at_4n / at_n < GROWTH_BOUND, f"4x the input took {at_4n / at_n:.1f}x the work ({at_n:.3f} s at n={n})"
    assert out_4n / out_n < GROWTH_BOUND, f"4x the input wrote {out_4n / out_n:.1f}x the output"
    times, plus = OUTPUT_BOUND
    assert out_4n <= times * in_4n + plus, f"{out_4n} bytes written for {in_4n}"


@pytest.mark.parametrize("shape", FILES)
def test_each_document_format_reads_and_writes_in_linear_work(shape: str) -> None:
    assert_linear(file_run(*FILES[shape]))


@pytest.mark.parametrize("shape", MARKUP)
def test_markup_is_parsed_and_rendered_in_linear_work(shape: str) -> None:
    """/v1/translate's markup: its units read and their translations put back, elements placed."""
    assert_linear(markup_run(*MARKUP[shape]))


@pytest.mark.parametrize("shape", INSETS)
def test_insets_are_taken_out_and_put_back_in_linear_work(shape: str) -> None:
    """/v1/translate's plain text: the runs of symbols and addresses of one long sentence."""
    assert_linear(insets_run(INSETS[shape]))
