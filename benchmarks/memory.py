"""The default service's memory through its heaviest requests: ``python -m benchmarks.memory``.

    python -m benchmarks.memory [--data DIR] [--models-dir DIR] [--setting MT_NAME=VALUE ...]
                                [--long-chars 19900] [--admitted-texts 4] [--docx-mb 250]
                                [--beam-texts 64] [--beam-chars 250] [--out FILE]

Starts the service as the README's serve command does (``service.launcher``: the shipped models of
``models/``, every setting at its default; ``--models-dir`` serves another repository, ``--setting``
sets any other) and sends it, one after another, each with ``--timeout-s`` (120 s) to be answered:

1. ``--long-texts`` (8) distinct texts of ``--long-chars`` (19,900) characters, one request each,
   with ``return_alignments``: a text's alignment matrix grows with the square of its length (an
   85 MB answer each, before ``MT_MAX_ALIGNMENT_CELLS``, which refuses them);
2. ``--admitted-texts`` (4) distinct texts, one request each with ``return_alignments``, each as
   long as the service's limits admit (``MT_MAX_ALIGNMENT_CELLS``, ``MT_MAX_BEAM_TOKENS`` at the
   model's beam, ``MT_MAX_CHARS``), counted as the service counts them
   (``benchmarks.heavy_requests.Limits``): the largest alignment answers it gives;
3. a .docx whose ``word/document.xml`` expands to ``--docx-mb`` (250) MB, built here with zipfile
   and compressed as it is written (``MT_MAX_DOCUMENT_BYTES`` refuses it);
4. ``--beam-texts`` (64) texts of ``--beam-chars`` (250) characters at ``--beam`` (16) beams with
   alignments: the search's caches and the engines' memory at their largest (within
   ``MT_MAX_BEAM_TOKENS``).

Texts are Multi30K's ``train.en`` sentences from ``--data``, in order, joined. Meanwhile the
resident memory of the service's processes (the HTTP process and the engine processes,
``benchmarks/rss.py``) is read every ``--sample-every-s`` (0.1 s), and for ``--settle-s`` (10 s)
after the last answer. The run passes when every request was answered in time with a 200 or a 4xx
in the service's error shape, their total peaked at most ``--peak-limit-mb`` (2,000 MB), came to
at most ``--after-limit-mb`` (1,000 MB) ``--settle-s`` after the last answer, and ``/readyz`` then
answers 200; it exits 1 otherwise. The result file is ``--out`` (default
``benchmarks/results/memory.json``), the service's log ``--workdir``/service.log.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from benchmarks.common import (
    DATA_DIR,
    RESULTS,
    RUNS,
    add_setting_argument,
    given_settings,
    markdown_table,
    read_lines,
    require_paths,
    settings_record,
    start_run,
    write_report,
)
from benchmarks.rss import Process, ProcessTree
from service.launcher import LiveService

if TYPE_CHECKING:
    from benchmarks.heavy_requests import Limits

SERIES_ROWS = 30
WORD = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
PACKAGE_RELATIONSHIPS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Target="word/document.xml" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"/></Relationships>'
)


@dataclass(frozen=True)
class Request:
    """One request of the run: a JSON body for ``/v1/translate`` or a file for ``/v1/translate_file``."""

    name: str
    json: dict | None = None
    file: tuple[str, bytes] | None = None


@dataclass
class Answer:
    name: str
    started_s: float
    seconds: float
    status: int  # 0: no answer within the timeout, or a transport error
    error_type: str | None
    response_mb: float


# -- the requests ----------------------------------------------------------------------------


def joined_texts(sentences: list[str], count: int, chars: int) -> Iterator[str]:
    """``count`` texts of about ``chars`` characters each (cut at a space), consecutive sentences
    joined by spaces, every one from where the last stopped: distinct texts."""
    position = 0
    for _ in range(count):
        text = ""
        while len(text) < chars:
            text += sentences[position % len(sentences)] + " "
            position += 1
        yield text[: text.rfind(" ", 0, chars + 1)].strip()


def admitted_texts(sentences: list[str], count: int, limits: Limits) -> Iterator[str]:
    """``count`` distinct texts, consecutive sentences joined by spaces, each the longest that
    ``limits`` admit in a request of its own with alignments."""

    def admitted(text: str) -> bool:
        return len(text) <= limits.settings.max_chars and limits.admitted([text], alignments=True)

    position = 0
    for _ in range(count):
        text = sentences[position]
        position += 1
        while admitted(longer := f"{text} {sentences[position % len(sentences)]}"):
            text = longer
            position += 1
        yield text


def word_bomb(expanded_bytes: int) -> bytes:
    """A .docx whose word/document.xml expands to ``expanded_bytes`` of paragraphs of text,
    compressed as it is written: never held expanded."""
    paragraph = b"<w:p><w:r><w:t>A dog runs through the park.</w:t></w:r></w:p>"
    block = paragraph * (1 << 14)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("[Content_Types].xml", CONTENT_TYPES)
        package.writestr("_rels/.rels", PACKAGE_RELATIONSHIPS)
        with package.open("word/document.xml", "w") as part:
            part.write(f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{WORD}">'.encode())
            part.write(b"<w:body>")
            for _ in range(math.ceil(expanded_bytes / len(block))):
                part.write(block)
            part.write(b"</w:body></w:document>")
    return out.getvalue()


def service_settings(args: argparse.Namespace) -> dict[str, str]:
    """The service's ``MT_*`` settings: its defaults, serving ``--models-dir`` if given, and the
    ``--setting`` ones."""
    models = {} if args.models_dir is None else {"MT_MODELS_DIR": str(args.models_dir.resolve())}
    return models | given_settings(args)


def requests(args: argparse.Namespace) -> list[Request]:
    # Imported here: heavy_requests builds its .docx from this module's parts.
    from benchmarks.heavy_requests import Limits

    sentences = read_lines(args.data / "train.en")
    pair = {"source_lang": "en", "target_lang": "de"}
    long_texts = joined_texts(sentences, args.long_texts, args.long_chars)
    longest = admitted_texts(sentences, args.admitted_texts, Limits.of(service_settings(args)))
    beam_texts = list(joined_texts(sentences[len(sentences) // 2 :], args.beam_texts, args.beam_chars))
    aligned = {**pair, "return_alignments": True}
    return [
        *(Request(f"text {i + 1}: {args.long_chars} chars, alignments", {"text": text, **aligned})
          for i, text in enumerate(long_texts)),
        *(Request(f"admitted text {i + 1}: {len(text)} chars, alignments", {"text": text, **aligned})
          for i, text in enumerate(longest)),
        Request(f".docx expanding to {args.docx_mb} MB", file=("bomb.docx", word_bomb(args.docx_mb << 20))),
        Request(f"{args.beam_texts} texts of {args.beam_chars} chars, beam {args.beam}, alignments",
                {"text": beam_texts, **aligned, "beam_size": args.beam}),
    ]  # fmt: skip


def send(client: httpx.Client, request: Request, start: float) -> Answer:
    """POST ``request`` and read its whole answer; status 0 when none came in time."""
    began = time.monotonic()
    try:
        if request.file is not None:
            response = client.post("/v1/translate_file", files={"file": request.file}, data={"target_lang": "de"})
        else:
            response = client.post("/v1/translate", json=request.json)
    except httpx.HTTPError:
        return Answer(request.name, began - start, time.monotonic() - began, 0, None, 0.0)
    seconds = time.monotonic() - began
    error = response.json().get("error", {}).get("type") if response.is_error else None
    return Answer(request.name, began - start, seconds, response.status_code, error, len(response.content) / 1e6)


# -- sampling ----------------------------------------------------------------------------------


class Sampler:
    """Reads the RSS of the service's processes every ``every_s`` in a thread of its own."""

    def __init__(self, tree: ProcessTree, every_s: float, start: float) -> None:
        self.tree, self.every_s, self.start = tree, every_s, start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.tree.sample(time.monotonic() - self.start)


# -- the report --------------------------------------------------------------------------------


def at_or_after(process: Process, at_s: float) -> float | None:
    """The process's first sample at or after ``at_s`` (MB); None if none was taken then."""
    return next((mb for t, mb in process.samples if t >= at_s), None)


def peak_between(process: Process, start_s: float, end_s: float) -> float | None:
    during = [mb for t, mb in process.samples if start_s <= t <= end_s]
    return max(during) if during else None


def memory_summary(tree: ProcessTree, settled_at_s: float) -> list[dict]:
    """Each process's and the whole service's RSS: at the start, at its peak, and once settled."""
    processes = [p for p in tree.processes.values() if p.samples]
    return [
        {"pid": p.pid, "role": p.role, "start_mb": p.samples[0][1], "peak_mb": max(mb for _, mb in p.samples),
         "after_mb": at_or_after(p, settled_at_s), "series": p.samples}
        for p in [*processes, tree.total()]
    ]  # fmt: skip


def answered(answer: Answer) -> bool:
    """A 200, or a 4xx in the service's error shape."""
    return answer.status == 200 or (400 <= answer.status < 500 and answer.error_type is not None)


def criteria(answers: list[Answer], total: dict, ready: int, args: argparse.Namespace) -> list[dict]:
    late = [a.name for a in answers if not answered(a)]
    return [
        {"criterion": f"every request answered within {args.timeout_s:g} s with a 200 or a 4xx naming its error",
         "passed": not late, "detail": f"not: {', '.join(late)}" if late else f"{len(answers)} of {len(answers)}"},
        {"criterion": f"peak RSS of all processes <= {args.peak_limit_mb:g} MB", "passed":
         total["peak_mb"] <= args.peak_limit_mb, "detail": f"{total['peak_mb']:.0f} MB"},
        {"criterion": f"RSS of all processes {args.settle_s:g} s after the last answer <= {args.after_limit_mb:g} MB",
         "passed": total["after_mb"] is not None and total["after_mb"] <= args.after_limit_mb,
         "detail": f"{total['after_mb']:.0f} MB" if total["after_mb"] is not None else "not sampled"},
        {"criterion": "/readyz answers 200 afterwards", "passed": ready == 200, "detail": str(ready)},
    ]  # fmt: skip


def requests_table(answers: list[Answer], total: Process) -> str:
    rows = []
    for a in answers:
        peak = peak_between(total, a.started_s, a.started_s + a.seconds)
        outcome = f"{a.status} {a.error_type}" if a.error_type else str(a.status or "no answer")
        peak_cell = f"{peak:.0f}" if peak is not None else ""
        rows.append([a.name, outcome, f"{a.seconds:.2f}", f"{a.response_mb:.2f}", peak_cell])
    return markdown_table(["request", "answer", "seconds", "answer MB", "peak RSS of all, MB"], rows)


def memory_table(memory: list[dict], settle_s: float) -> str:
    def mb(value: float | None) -> str:
        return f"{value:.1f}" if value is not None else ""

    header = ["process", "pid", "start", "peak", f"{settle_s:g} s after the last answer"]
    rows = [[m["role"], m["pid"] or "", mb(m["start_mb"]), mb(m["peak_mb"]), mb(m["after_mb"])] for m in memory]
    return markdown_table(header, rows)


def series_table(memory: list[dict]) -> str:
    """The RSS series of each process at about ``SERIES_ROWS`` times, each row the peak since the last."""
    total = memory[-1]["series"]
    stride = max(1, math.ceil(len(total) / SERIES_ROWS))
    edges = [at for at, _ in total[stride - 1 :: stride]] + ([total[-1][0]] if len(total) % stride else [])
    header = ["s", *(f"{m['role']} {m['pid']}" if m["pid"] else "all" for m in memory)]
    rows, since = [], -1.0
    for edge in edges:
        peaks = [max((mb for at, mb in m["series"] if since < at <= edge), default=None) for m in memory]
        rows.append([f"{edge:g}", *(f"{p:.0f}" if p is not None else "" for p in peaks)])
        since = edge
    return markdown_table(header, rows)


def report(answers: list[Answer], tree: ProcessTree, settled_at_s: float, ready: int, args: argparse.Namespace) -> dict:
    memory = memory_summary(tree, settled_at_s)
    checks = criteria(answers, memory[-1], ready, args)
    verdict = {True: "pass", False: "**FAIL**"}
    markdown = "\n\n".join([
        "### Criteria\n\n" + markdown_table(["criterion", "result", "detail"],
                                            [[c["criterion"], verdict[c["passed"]], c["detail"]] for c in checks]),
        "### Requests, one after another\n\n" + requests_table(answers, tree.total()),
        f"### Resident memory (MB, sampled every {args.sample_every_s:g} s)\n\n" + memory_table(memory, args.settle_s),
        "### RSS series (MB, the peak of each interval)\n\n" + series_table(memory),
    ])  # fmt: skip
    return {
        "settings": settings_record(args),
        "passed": all(c["passed"] for c in checks),
        "criteria": checks,
        "requests": [vars(a) for a in answers],
        "memory": memory,
        "markdown": markdown,
    }


# -- the entry point -------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="Multi30K: train.en")
    parser.add_argument("--models-dir", type=Path, help="MT_MODELS_DIR (default: the service's, models/)")
    add_setting_argument(parser)
    parser.add_argument("--long-texts", type=int, default=8, help="long texts with alignments, a request each")
    parser.add_argument("--long-chars", type=int, default=19_900, help="characters of each long text")
    parser.add_argument("--admitted-texts", type=int, default=4, help="texts as long as the limits admit, aligned")
    parser.add_argument("--docx-mb", type=int, default=250, help="MB the .docx's document.xml expands to")
    parser.add_argument("--beam-texts", type=int, default=64, help="texts of the wide-beam request")
    parser.add_argument("--beam-chars", type=int, default=250, help="characters of each of them")
    parser.add_argument("--beam", type=int, default=16, help="its beam size")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="longest wait for each answer")
    parser.add_argument("--sample-every-s", type=float, default=0.1, help="seconds between RSS samples")
    parser.add_argument("--settle-s", type=float, default=10.0, help="seconds after the last answer to sample")
    parser.add_argument("--peak-limit-mb", type=float, default=2000.0, help="most RSS of all processes at once")
    parser.add_argument("--after-limit-mb", type=float, default=1000.0, help="most RSS once settled")
    parser.add_argument("--workdir", type=Path, default=RUNS / "memory", help="the service's log")
    parser.add_argument("--out", type=Path, default=RESULTS / "memory.json", help="the result file")
    args = parser.parse_args(argv)
    require_paths(parser, [args.data / "train.en", *([args.models_dir] if args.models_dir else [])])
    if min(args.long_chars, args.docx_mb, args.beam_texts, args.beam_chars, args.beam) < 1:
        parser.error("sizes must be >= 1")
    if min(args.long_texts, args.admitted_texts) < 0:
        parser.error("--long-texts and --admitted-texts must be >= 0")
    if min(args.timeout_s, args.sample_every_s, args.settle_s) <= 0:
        parser.error("durations must be > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    """0 when every criterion passed, else 1."""
    start = start_run("benchmarks.memory", argv)
    args = parse_args(start.argv)
    work = requests(args)
    with LiveService(service_settings(args), args.workdir / "service.log") as service:
        began = time.monotonic()
        tree = ProcessTree(service.process.pid)
        with httpx.Client(base_url=service.url, timeout=args.timeout_s, trust_env=False) as client:
            with Sampler(tree, args.sample_every_s, began):
                answers = [send(client, request, began) for request in work]
                settled_at_s = time.monotonic() - began + args.settle_s
                time.sleep(args.settle_s + 3 * args.sample_every_s)  # a sample at settled_at_s or just after
            ready = client.get("/readyz").status_code
    result = report(answers, tree, settled_at_s, ready, args)
    write_report(start, args.out, result)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
