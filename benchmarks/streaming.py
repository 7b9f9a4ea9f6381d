"""How soon a stream's first sentence arrives: ``python -m benchmarks.streaming``.

    python -m benchmarks.streaming [--sentences 40] [--texts 8]

The default service (the shipped models, default settings) on this machine; each text is
``--sentences`` consecutive Multi30K val sentences, sent once to ``POST /v1/translate/stream`` and
once, with a different last word so that the cache cannot answer, to ``POST /v1/translate``, one
request at a time. Reported: medians over the texts (the first one left out, a warm-up) of the
time to the first ``sentence`` event, to the ``done`` event, and to /v1/translate's answer.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import httpx
from httpx_sse import connect_sse

from benchmarks.common import DATA_DIR, RESULTS, RUNS, markdown_table, read_lines, start_run, write_report
from service.launcher import LiveService


def timed_stream(client: httpx.Client, text: str) -> tuple[float, float]:
    """Seconds to the first sentence event and to the done event."""
    start = time.perf_counter()
    first = None
    body = {"text": text, "source_lang": "en", "target_lang": "de"}
    with connect_sse(client, "POST", "/v1/translate/stream", json=body) as events:
        for event in events.iter_sse():
            if first is None and event.event == "sentence":
                first = time.perf_counter() - start
            if event.event in ("done", "error"):
                assert event.event == "done", event.data
    assert first is not None
    return first, time.perf_counter() - start


def timed_translate(client: httpx.Client, text: str) -> float:
    start = time.perf_counter()
    client.post("/v1/translate", json={"text": text, "source_lang": "en", "target_lang": "de"}).raise_for_status()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.streaming", argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="Multi30K: val.en")
    parser.add_argument("--sentences", type=int, default=40, help="sentences per text")
    parser.add_argument("--texts", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=RUNS / "streaming", help="the service's log")
    parser.add_argument("--out", type=Path, default=RESULTS / "streaming.json")
    args = parser.parse_args(argv)

    lines = read_lines(args.data / "val.en", args.sentences * args.texts)
    texts = [" ".join(lines[i : i + args.sentences]) for i in range(0, len(lines), args.sentences)]
    args.workdir.mkdir(parents=True, exist_ok=True)
    firsts, streams, whole = [], [], []
    with (
        LiveService({"MT_LOG_LEVEL": "warning"}, args.workdir / "service.log") as service,
        httpx.Client(base_url=service.url, timeout=120) as client,
    ):
        for text in texts:
            first, done = timed_stream(client, text)
            firsts.append(first)
            streams.append(done)
            whole.append(timed_translate(client, text.rsplit(" ", 1)[0] + " now."))
    medians = {name: statistics.median(v[1:]) for name, v in [("first", firsts), ("done", streams), ("whole", whole)]}
    rows = [
        ["stream: first sentence event", f"{medians['first']:.3f}"],
        ["stream: done event", f"{medians['done']:.3f}"],
        ["/v1/translate: the whole text", f"{medians['whole']:.3f}"],
    ]
    markdown = markdown_table([f"{args.sentences}-sentence text, one request at a time", "seconds (median)"], rows)
    report = {
        "settings": {"sentences": args.sentences, "texts": args.texts},
        "seconds": {"first": firsts, "done": streams, "whole": whole},
        "medians": medians,
        "markdown": markdown,
    }
    write_report(start, args.out, report)


if __name__ == "__main__":
    main()
