"""What one key doing the worst it can within the limits does to another key. ``python -m benchmarks.key_shares``

    python -m benchmarks.key_shares [--attack KIND ...] [--duration 30] [--out FILE]

For each ``--attack`` kind, a fresh service (``service.launcher``) with two keys, the attacker's and
the victim's (MT_API_KEYS), and its default limits otherwise (``--setting MT_NAME=VALUE`` for
another). For ``--duration`` seconds the attacker's key does one kind of issue 49's attack run, as
hard as the limits admit:

- ``none``: nothing, the victim's latencies on the same machine without an attack, to compare with;
- ``drip`` (finding 2): MT_MAX_UPLOADS uploads to /v1/translate_file at once, each declaring
  MT_MAX_FILE_BYTES and sending its body at ``DRIP_OVER_RATE`` x MT_MIN_BODY_RATE, so that it is
  never too slow and holds its slot until MT_UPLOAD_TIMEOUT_S; one refused (429, its key's share)
  or cut off (408) is sent again a second later;
- ``documents`` (findings 1, 5, 6): ``CLIENTS`` clients uploading /v2/document files back to back,
  never downloading them: the key's share of the documents waiting and of the file store kept full;
- ``glossary`` (finding 4): ``CLIENTS`` clients replacing all MAX_ENTRIES entries of a glossary
  of the attacker's, in a loop;
- ``hostile`` (findings 1, 3): ``CLIENTS`` clients sending back to back the files whose reading was
  amplifying or quadratic, at the limits: the 112 KB Markdown file whose references wrote 200 MB,
  and an HTML file of MT_MAX_FILE_BYTES of ``"< "``;
- ``malformed`` (findings 7, 8): ``CLIENTS`` clients sending back to back the 21 bytes of HTML that
  html.parser failed on (as a text of /v1/translate and as a file) and the 1 KB of Markdown whose
  error killed the document process;
- ``invalid`` (finding 10): ``CLIENTS`` clients sending back to back glossaries that validation
  refuses: names with NUL, line breaks, ESC or U+202E, a 500 KB glossary_id, a source term ``-``;
- ``store`` (finding 9): ``CLIENTS`` clients replacing the entries of a small glossary of the
  attacker's while, every ``STORE_FAULT_S`` seconds, the glossary database is deleted or
  overwritten with garbage, in turn (a fault of the disk's, not of a key's);
- ``stopped`` (finding 11): every ``STOP_EVERY_S`` seconds each document process SIGSTOPped (an
  operator's or the kernel's doing), the attacker's clients sending a one-line file and one just
  past LIGHT_FILE_BYTES in turn meanwhile (both lanes' processes busy).

Meanwhile the victim's key, from a process of its own (so that the attacker's clients never delay
it): one test sentence on /v1/translate every ``--probe-interval`` seconds, and every
``--upload-interval`` seconds a one-line .txt on /v1/translate_file and another through
/v2/document (uploaded, polled until done and downloaded: timed to the download), and /readyz;
what is not answered ``GRACE_S`` after the end, the attack still running, is counted unfinished.
Reported per kind: each of the victim's latencies (p50, p99, max) and failures, the attacker's
requests by how they ended, and the peak of the resident memory of the service's processes (the
HTTP, engine and document processes together, read every ``RSS_EVERY_S``) from the attack's start.
The result file is ``--out``; the services' logs go to ``--workdir``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import multiprocessing
import random
import shutil
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx
import psutil

from benchmarks.common import (
    RESULTS,
    RUNS,
    TEST_SRC,
    add_setting_argument,
    given_settings,
    markdown_table,
    read_lines,
    settings_record,
    start_run,
    write_report,
)
from benchmarks.heavy_requests import PAIR, Limits, glossary_entries
from benchmarks.noisy_neighbour import Outcomes, counted
from benchmarks.rss import ProcessTree
from service.documents import DOCUMENT_PROCESS_NAME, LIGHT_FILE_BYTES
from service.launcher import LiveService
from service.settings import Settings

KINDS = ("none", "drip", "documents", "glossary", "hostile", "malformed", "invalid", "store", "stopped")
KEYS = {"attacker": "attacker-key", "victim": "victim-key"}
CLIENTS = 8  # the attacker's concurrent clients, where it has several
DRIP_OVER_RATE = 1.25
CLIENT_TIMEOUT_S = 600.0
GRACE_S = 30.0
BOUNDARY = "key-shares-boundary"
STORE_FAULT_S = 2.0
RSS_EVERY_S = 0.5
STOP_EVERY_S = 2.0
# Finding 7: html.parser's AssertionError; finding 8: a MarkupError that did not unpickle.
MALFORMED_HTML = "<p>A dog.</p><![<![x"
MALFORMED_MD = "*" * 514 + "a" + "*" * 514
# The 112 KB reproduction of finding 1: one destination of 100,000 characters, referenced 2,000 times.
REFERENCES_MD = ("[r]: http://e.com/" + "a" * 100_000 + "\n\n" + ("Dog " + "![][r]" * 200 + "\n\n") * 10).encode()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def deepl(key: str) -> dict[str, str]:
    return {"Authorization": f"DeepL-Auth-Key {key}"}


# -- the victim --------------------------------------------------------------------------------


async def timed(outcomes: Outcomes, call: Awaitable[httpx.Response]) -> None:
    """The latency of one of the victim's calls, or why it failed."""
    started = time.monotonic()
    try:
        response = await call
    except httpx.HTTPError as e:
        outcomes.fail(type(e).__name__)
        return
    except asyncio.CancelledError:
        outcomes.unfinished += 1
        raise
    if response.status_code != 200:
        outcomes.fail(str(response.status_code))
        return
    outcomes.latencies.append(time.monotonic() - started)


async def document_round_trip(client: httpx.AsyncClient, text: str) -> httpx.Response:
    """A one-line .txt through /v2/document: uploaded, polled until done, downloaded."""
    headers = deepl(KEYS["victim"])
    files = {"file": ("victim.txt", text.encode())}
    uploaded = await client.post("/v2/document", files=files, data={"target_lang": "DE"}, headers=headers)
    if uploaded.status_code != 200:
        return uploaded
    ids = uploaded.json()
    status = {"status": "queued"}
    while status["status"] in ("queued", "translating"):
        await asyncio.sleep(0.1)
        polled = await client.post(f"/v2/document/{ids['document_id']}", data=ids, headers=headers)
        if polled.status_code != 200:
            return polled
        status = polled.json()
    return await client.post(f"/v2/document/{ids['document_id']}/result", data=ids, headers=headers)


async def victim(url: str, sentences: list[str], probe_s: float, upload_s: float, until: float) -> dict[str, dict]:
    outcomes = {name: Outcomes() for name in ("sentence", "translate_file", "document", "readyz")}
    seconds = until - time.monotonic()
    every = max(1, round(upload_s / probe_s))
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S, headers=bearer(KEYS["victim"])) as client:
        calls: list[asyncio.Task[None]] = []
        for n, sentence in enumerate(itertools.cycle(sentences)):
            if time.monotonic() >= until:
                break
            body = {**PAIR, "text": sentence}
            calls.append(asyncio.create_task(timed(outcomes["sentence"], client.post("/v1/translate", json=body))))
            if n % every == 0:
                file = {"file": ("victim.txt", sentence.encode())}
                upload = client.post("/v1/translate_file", files=file, data=PAIR)
                calls += [
                    asyncio.create_task(timed(outcomes["translate_file"], upload)),
                    asyncio.create_task(timed(outcomes["document"], document_round_trip(client, sentence))),
                    asyncio.create_task(timed(outcomes["readyz"], client.get("/readyz"))),
                ]
            await asyncio.sleep(probe_s)
        # What is not answered GRACE_S after the end is counted unfinished, the attack still running.
        _, waiting = await asyncio.wait(calls, timeout=until + GRACE_S - time.monotonic())
        for call in waiting:
            call.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
    return {name: o.summary(seconds) for name, o in outcomes.items()}


def run_victim(url: str, sentences: list[str], probe_s: float, upload_s: float, until: float) -> dict[str, dict]:
    return asyncio.run(victim(url, sentences, probe_s, upload_s, until))


# -- the attacker ------------------------------------------------------------------------------


# An attack: the service, its settings, the sentences its texts are made of, and how its requests ended.
Attack = Callable[[LiveService, Settings, list[str], Counter[str]], Awaitable[None]]


async def drip_one(service: LiveService, settings: Settings, ended: Counter[str]) -> None:
    """One upload at a little over the minimum rate, sent again each time it ends."""
    fields = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="target_lang"\r\n\r\nde\r\n'
    part = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
    length = settings.max_file_bytes
    head = (
        f"POST /v1/translate_file HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEYS['attacker']}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {length}\r\n\r\n"
    )
    per_second = int(settings.min_body_rate * DRIP_OVER_RATE) or 1
    while True:
        reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        try:
            writer.write((head + fields + part).encode())
            answer = asyncio.create_task(reader.readline())
            while not answer.done():
                writer.write(b"x" * per_second)
                await writer.drain()
                await asyncio.wait({answer}, timeout=1.0)
            status = answer.result().split(b" ")[1:2]
            ended[status[0].decode() if status else "closed"] += 1
        except (ConnectionError, IndexError):
            ended["closed"] += 1
        finally:
            writer.close()
        await asyncio.sleep(1.0)


async def drip(service: LiveService, settings: Settings, _: list[str], ended: Counter[str]) -> None:
    await asyncio.gather(*(drip_one(service, settings, ended) for _ in range(settings.max_uploads)))


async def loop(service: LiveService, ended: Counter[str], request: Callable[[httpx.AsyncClient], Awaitable]) -> None:
    """``CLIENTS`` clients of the attacker's, each sending ``request`` back to back."""

    async def client_loop() -> None:
        async with httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT_S) as client:
            while True:
                try:
                    ended[str((await request(client)).status_code)] += 1
                except httpx.HTTPError as e:
                    ended[type(e).__name__] += 1
                    await asyncio.sleep(1.0)

    await asyncio.gather(*(client_loop() for _ in range(CLIENTS)))


async def documents(service: LiveService, settings: Settings, sentences: list[str], ended: Counter[str]) -> None:
    rng = random.Random(0)

    def upload(client: httpx.AsyncClient) -> Awaitable[httpx.Response]:
        # Paragraphs of the test set up to MT_MAX_FILE_BYTES / 8: every upload new, never cached.
        text = "\n\n".join(rng.choice(sentences) for _ in range(settings.max_file_bytes // 8 // 60))
        files = {"file": ("attack.md", text.encode())}
        return client.post("/v2/document", files=files, data={"target_lang": "DE"}, headers=deepl(KEYS["attacker"]))

    async def paced(client: httpx.AsyncClient) -> httpx.Response:
        response = await upload(client)
        if response.status_code == 429:  # its share is full: try again as its Retry-After says
            await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
        return response

    await loop(service, ended, paced)


async def glossary(service: LiveService, settings: Settings, sentences: list[str], ended: Counter[str]) -> None:
    entries = glossary_entries(sentences)
    async with httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT_S) as client:
        body = {"name": "attack", **PAIR, "entries": entries}
        created = await client.post("/v1/glossaries", json=body, headers=bearer(KEYS["attacker"]))
        glossary_id = created.raise_for_status().json()["glossary_id"]
    path = f"/v1/glossaries/{glossary_id}/entries"
    await loop(service, ended, lambda c: c.put(path, json={"entries": entries}, headers=bearer(KEYS["attacker"])))


async def hostile(service: LiveService, settings: Settings, _: list[str], ended: Counter[str]) -> None:
    html = b"<p>A dog runs.</p>" + b"< " * ((settings.max_file_bytes - 64) // 2)
    files = itertools.cycle([("attack.md", REFERENCES_MD), ("attack.html", html)])

    def send(client: httpx.AsyncClient) -> Awaitable[httpx.Response]:
        return client.post(
            "/v1/translate_file", files={"file": next(files)}, data=PAIR, headers=bearer(KEYS["attacker"])
        )

    await loop(service, ended, send)


async def malformed(service: LiveService, settings: Settings, _: list[str], ended: Counter[str]) -> None:
    requests = itertools.cycle(
        [
            ("/v1/translate", {"json": {**PAIR, "text": MALFORMED_HTML, "format": "html"}}),
            ("/v1/translate_file", {"files": {"file": ("a.html", MALFORMED_HTML.encode())}, "data": PAIR}),
            ("/v1/translate_file", {"files": {"file": ("a.md", MALFORMED_MD.encode())}, "data": PAIR}),
        ]
    )

    def send(client: httpx.AsyncClient) -> Awaitable[httpx.Response]:
        path, body = next(requests)
        return client.post(path, headers=bearer(KEYS["attacker"]), **body)

    await loop(service, ended, send)


async def invalid(service: LiveService, settings: Settings, _: list[str], ended: Counter[str]) -> None:
    entries = [{"source": "dog", "target": "Hund"}]
    bodies = [{"name": f"a{bad}b", **PAIR, "entries": entries} for bad in ("\x00", "\r\n", "\x1b[2J", "\u202e")]
    bodies.append({"name": "dash", **PAIR, "entries": [{"source": "-", "target": "Hund"}]})
    # A 500 KB glossary_id, once echoed in a 500 KB answer.
    long_id = {**PAIR, "text": "A dog runs.", "glossary_id": "a" * 500_000}
    requests = itertools.cycle([("/v1/glossaries", body) for body in bodies] + [("/v1/translate", long_id)])

    def send(client: httpx.AsyncClient) -> Awaitable[httpx.Response]:
        path, body = next(requests)
        return client.post(path, json=body, headers=bearer(KEYS["attacker"]))

    await loop(service, ended, send)


async def store(service: LiveService, settings: Settings, sentences: list[str], ended: Counter[str]) -> None:
    database = settings.data_dir / "glossaries.sqlite3"

    async def faults() -> None:
        for n in itertools.count():
            await asyncio.sleep(STORE_FAULT_S)
            if n % 2:
                database.write_bytes(b"not a database" * 1000)
            else:
                database.unlink(missing_ok=True)
            ended["store " + ("overwritten" if n % 2 else "deleted")] += 1

    entries = glossary_entries(sentences, size=100)
    async with httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT_S) as client:
        body = {"name": "attack", **PAIR, "entries": entries}
        created = await client.post("/v1/glossaries", json=body, headers=bearer(KEYS["attacker"]))
        glossary_id = created.raise_for_status().json()["glossary_id"]
    path = f"/v1/glossaries/{glossary_id}/entries"
    put = loop(service, ended, lambda c: c.put(path, json={"entries": entries}, headers=bearer(KEYS["attacker"])))
    await asyncio.gather(faults(), put)


async def stopped(service: LiveService, settings: Settings, sentences: list[str], ended: Counter[str]) -> None:
    async def stop_every() -> None:
        """Each document process running, every ``STOP_EVERY_S`` (the attacker's files start them)."""
        while True:
            await asyncio.sleep(STOP_EVERY_S)
            for process in psutil.Process(service.process.pid).children():
                with contextlib.suppress(psutil.Error):
                    if process.name() == DOCUMENT_PROCESS_NAME and process.status() != psutil.STATUS_STOPPED:
                        process.suspend()
                        ended["SIGSTOP"] += 1

    # A light file and one past LIGHT_FILE_BYTES in turn: both lanes' processes start at once.
    texts = itertools.cycle([random.choice(sentences), "\n\n".join(sentences)[: LIGHT_FILE_BYTES + 1]])

    def send(client: httpx.AsyncClient) -> Awaitable[httpx.Response]:
        files = {"file": ("a.txt", next(texts).encode())}
        return client.post("/v1/translate_file", files=files, data=PAIR, headers=bearer(KEYS["attacker"]))

    await asyncio.gather(stop_every(), loop(service, ended, send))


async def none(service: LiveService, settings: Settings, sentences: list[str], ended: Counter[str]) -> None:
    await asyncio.Event().wait()


ATTACKS: dict[str, Attack] = {
    "none": none,
    "drip": drip,
    "documents": documents,
    "glossary": glossary,
    "hostile": hostile,
    "malformed": malformed,
    "invalid": invalid,
    "store": store,
    "stopped": stopped,
}


# -- a run -------------------------------------------------------------------------------------


async def measure(
    service: LiveService, kind: str, settings: Settings, pool: ProcessPoolExecutor, args: argparse.Namespace
) -> dict:
    ended: Counter[str] = Counter()
    sentences = read_lines(args.src)
    tree = ProcessTree(service.process.pid)
    sampling = asyncio.create_task(sampled(tree))
    attack = asyncio.create_task(ATTACKS[kind](service, settings, sentences, ended))
    await asyncio.sleep(args.warmup)  # the attack at full strength before the victim starts
    until = time.monotonic() + args.duration
    victim_run = asyncio.get_running_loop().run_in_executor(
        pool, run_victim, service.url, sentences, args.probe_interval, args.upload_interval, until
    )
    try:
        probes = await victim_run
    finally:
        for task in (attack, sampling):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    peak = max((mb for _, mb in tree.total().samples), default=None)
    return {"kind": kind, "seconds": args.duration, "victim": probes, "attacker": dict(ended), "peak_rss_mb": peak}


async def sampled(tree: ProcessTree) -> None:
    """The service's processes' resident memory every ``RSS_EVERY_S``, from the attack's start."""
    started = time.monotonic()
    while True:
        with contextlib.suppress(psutil.Error):
            await asyncio.to_thread(tree.sample, time.monotonic() - started)
        await asyncio.sleep(RSS_EVERY_S)


HEADER = [
    "attack",
    "victim's call",
    "answered",
    "failed",
    "unfinished",
    "p50 s",
    "p99 s",
    "max s",
    "attacker's requests",
    "service's peak RSS MB",
]


def rows(level: dict) -> list[list[object]]:
    attacker = ", ".join(f"{status}: {n}" for status, n in sorted(level["attacker"].items())) or "none ended"
    return [
        [level["kind"], name, o["answered"], counted(o), o["unfinished"], o["p50_s"], o["p99_s"], o["max_s"]]
        + ([attacker, level["peak_rss_mb"]] if i == 0 else ["", ""])
        for i, (name, o) in enumerate(level["victim"].items())
    ]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attack", nargs="+", choices=KINDS, default=list(KINDS), metavar="KIND", help=f"of {KINDS}")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds the victim is measured, per kind")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of attack before the victim starts")
    parser.add_argument("--probe-interval", type=float, default=0.5)
    parser.add_argument("--upload-interval", type=float, default=2.0)
    add_setting_argument(parser)
    parser.add_argument("--src", type=Path, default=TEST_SRC, help="the sentences of the victim's and attacker's texts")
    parser.add_argument("--out", type=Path, default=RESULTS / "key_shares.json")
    parser.add_argument("--workdir", type=Path, default=RUNS / "key_shares")
    args = parser.parse_args(argv)
    return args


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.key_shares", argv)
    args = parse_args(start.argv)
    given = given_settings(args)
    levels = []
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        for kind in args.attack:
            # Data of each kind's own, made afresh: the store kind leaves its database damaged.
            data = args.workdir / "data" / kind
            shutil.rmtree(data, ignore_errors=True)
            base = {"MT_API_KEYS": ",".join(KEYS.values()), "MT_DATA_DIR": str(data)}
            env = base | given
            settings = Limits.of(env).settings
            with LiveService(env, args.workdir / f"service-{kind}.log") as service:
                levels.append(asyncio.run(measure(service, kind, settings, pool, args)))
            print(markdown_table(HEADER, rows(levels[-1])), flush=True)
    table = markdown_table(HEADER, [row for level in levels for row in rows(level)])
    write_report(start, args.out, {"settings": settings_record(args), "levels": levels, "markdown": table})


if __name__ == "__main__":
    main()
