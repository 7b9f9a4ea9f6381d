"""The default service under mixed traffic for a long time: ``python -m benchmarks.soak``.

    python -m benchmarks.soak [--minutes 30 | --seconds S] [--data DIR] [--clients 4] [--out FILE]

Starts the service as the README's serve command does (``service.launcher``: the shipped models of
``models/``, every setting at its default; ``--models-dir`` serves another repository) and sends it,
for ``--minutes``, the steady mix of ``benchmarks/traffic.py`` from ``--clients`` closed-loop
clients (plain translations on both APIs, alignments, n-best lists, language detection, bad bodies,
oversize requests, 1 ms deadlines, deliberate disconnects), and every ``--flood-every-s`` a flood:
the steady clients pause, then 3 × ``MT_MAX_QUEUE_SENTENCES / MT_MAX_TEXTS`` clients send full-size
requests until the queue refuses some (429). The steady mix pauses so that a 429 anywhere else is a
finding, not noise. Sentences come from Multi30K's ``train.en`` and ``train.de`` in ``--data``.

Every ``--sample-every-s`` the resident memory of the service's processes is read
(``benchmarks/rss.py``). **Warm-up** is the first ``--warmup-s`` (3 minutes): by then the floods at
0.5, 1.5 and 2.5 minutes have run full batches through both models in both engine processes
(onnxruntime's arenas and the beam search's caches near their high-water mark), the 1,024-entry
translation cache has filled and turned over many times, and every kind of request has run hundreds
of times. The warm-up RSS is the median of the samples of the ``--window-s`` (1 minute) after it,
the final RSS the median of the last minute's; growth = final / warm-up − 1, judged only when the
run lasts at least warm-up + two windows.

The run passes when: every request waited for is answered (no transport error, no hang); every answer
has a status its request expects (a 500 never does; a 504 only for the 1 ms deadlines; a 400 only for
a bad body or a sentence identified as a language no model translates from); every kind got each of
its expected statuses and every flood some 429s; the server's ``mt_requests_total`` counts as many
requests per route as were sent (the disconnected ones as 499) and no 5xx but the deadlines' 504s;
the service's log has no error or traceback; it exits 0 on SIGTERM; its processes are the same from
the first sample to the last (no engine restarted); and each one's RSS grew less than 10% after
warm-up. It exits 1 otherwise. The result file is ``--out`` (default ``benchmarks/results/soak.json``),
the service's log ``--workdir``/service.log.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import uvloop

from benchmarks.common import (
    DATA_DIR,
    RESULTS,
    RUNS,
    markdown_table,
    read_lines,
    require_paths,
    settings_record,
    start_run,
    write_report,
)
from benchmarks.http_client import RawClient
from benchmarks.loadgen import metric_samples
from benchmarks.rss import ProcessTree, Windows, summaries
from benchmarks.traffic import DISCONNECTED, KINDS, NO_ANSWER, Limits, Request, Traffic, flood_pair
from service.launcher import LiveService

MAX_GROWTH = 0.10  # of each process's RSS, from warm-up to the end
FLOOD_ROUNDS = 4  # requests per flood client at most; all stop at the first 429
SETTLE_S = 60.0  # longest wait for the server to count the last requests (a hung-up one may still run)
LOG_ERROR = re.compile(r"\b(ERROR|CRITICAL)\b|^Traceback")
SERIES_ROWS = 16  # rows of the markdown RSS series; the result file has every sample


@dataclass
class Tally:
    """Outcomes by (kind, path, outcome), what each (kind, path) expects, and the outcomes that were
    not among their request's expected ones."""

    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    expected: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    unexpected: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def add(self, request: Request, outcome: str) -> None:
        key = (request.kind, request.path, outcome)
        self.counts[key] += 1
        self.expected.setdefault(key[:2], set()).update(request.expected)
        if outcome not in request.expected:
            self.unexpected[key] += 1

    def total(self, outcome: str | None = None) -> int:
        return sum(n for (_, _, found), n in self.counts.items() if outcome in (None, found))

    def by_path(self) -> dict[str, int]:
        found: Counter[str] = Counter()
        for (_, path, _), n in self.counts.items():
            found[path] += n
        return dict(found)

    def seen(self, kind: str) -> set[str]:
        return {outcome for (k, _, outcome) in self.counts if k == kind}


class Gate:
    """Steady requests pass while it is open; a flood closes it and waits for those in flight."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._in_flight = 0

    @asynccontextmanager
    async def steady(self) -> AsyncIterator[bool]:
        """Wait while a flood runs; whether it had to."""
        waited = False
        # Checked again after every wake-up: a flood may have closed the gate in between.
        while not self._open.is_set():
            waited = True
            await self._open.wait()
        self._in_flight += 1
        self._idle.clear()
        try:
            yield waited
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        self._open.clear()
        try:
            await self._idle.wait()
            yield
        finally:
            self._open.set()


@dataclass
class Soak:
    """One soak's traffic against the service at ``url``, and what it saw."""

    url: str
    traffic: Traffic
    tree: ProcessTree
    args: argparse.Namespace
    tally: Tally = field(default_factory=Tally)
    floods: list[dict] = field(default_factory=list)
    gate: Gate = field(default_factory=Gate)

    async def run(self) -> None:
        start = time.monotonic()
        await asyncio.gather(
            *(self.steady_client(start + self.args.duration_s) for _ in range(self.args.clients)),
            self.flood_schedule(start),
            self.sample_schedule(start),
        )

    async def send(self, client: RawClient, request: Request) -> str:
        if request.hangup is None:
            status = await client.post(request.path, request.body)
            outcome = str(status) if status else NO_ANSWER
        else:
            hangup = request.hangup
            sent = await client.abandon(request.path, request.body, body_sent=hangup.body_sent, after_s=hangup.after_s)
            outcome = DISCONNECTED if sent else NO_ANSWER
        self.tally.add(request, outcome)
        return outcome

    async def steady_client(self, end: float) -> None:
        client = RawClient(self.url)
        try:
            while time.monotonic() < end:
                request = self.traffic.steady()
                async with self.gate.steady() as waited:
                    if waited:  # through a flood: long enough for the server to close an idle connection
                        await client.aclose()
                    await self.send(client, request)
        finally:
            await client.aclose()

    async def flood_schedule(self, start: float) -> None:
        """A flood every ``--flood-every-s``, the first after half of that."""
        every = self.args.flood_every_s
        for number in range(math.ceil(self.args.duration_s / every - 0.5)):
            await asyncio.sleep(max(0.0, start + (number + 0.5) * every - time.monotonic()))
            async with self.gate.exclusive():
                began = time.monotonic()
                outcomes = await self.flood(number)
            self.floods.append({"number": number, "at_s": round(began - start, 1), "pair": "-".join(flood_pair(number)),
                                "requests": len(outcomes), "refused": outcomes.count("429"),
                                "seconds": round(time.monotonic() - began, 2)})  # fmt: skip
            print(f"{began - start:.0f} s: {self.tally.total()} requests; flood {number}: {len(outcomes)} requests, "
                  f"{outcomes.count('429')} refused; {self.tree.line()}", file=sys.stderr, flush=True)  # fmt: skip

    async def flood(self, number: int) -> list[str]:
        """Full-size requests from many clients at once, each client's next as soon as its last is
        answered, until one is refused (or ``FLOOD_ROUNDS`` each)."""
        limits = self.traffic.limits
        outcomes: list[str] = []

        async def flood_client() -> None:
            client = RawClient(self.url)
            try:
                for _ in range(FLOOD_ROUNDS):
                    outcomes.append(await self.send(client, self.traffic.flood(number)))
                    if "429" in outcomes:
                        return
            finally:
                await client.aclose()

        clients = 3 * math.ceil(limits.max_queue_sentences / limits.max_texts)
        await asyncio.gather(*(flood_client() for _ in range(clients)))
        return outcomes

    async def sample_schedule(self, start: float) -> None:
        """An RSS sample every ``--sample-every-s`` from the start, and one at the end."""
        every, duration = self.args.sample_every_s, self.args.duration_s
        for at in [*(i * every for i in range(math.ceil(duration / every))), duration]:
            await asyncio.sleep(max(0.0, start + at - time.monotonic()))
            self.tree.sample(time.monotonic() - start)


# -- what the server says --------------------------------------------------------------------


def server_requests(url: str) -> Counter[tuple[str, str]]:
    """The server's ``mt_requests_total`` by (route, status)."""
    found: Counter[tuple[str, str]] = Counter()
    for sample in metric_samples(url, "mt_requests"):
        if sample.name == "mt_requests_total":
            found[sample.labels["route"], sample.labels["status"]] += int(sample.value)
    return found


def per_route(counted: Counter[tuple[str, str]], paths: dict[str, int]) -> dict[str, int]:
    return {path: sum(n for (route, _), n in counted.items() if route == path) for path in paths}


def settled_server_requests(url: str, sent: dict[str, int]) -> Counter[tuple[str, str]]:
    """The server's counts once it has counted as many requests per route as were sent (one whose
    client hung up may still be finishing), or after ``SETTLE_S``."""
    deadline = time.monotonic() + SETTLE_S
    counted = server_requests(url)
    while per_route(counted, sent) != sent and time.monotonic() < deadline:
        time.sleep(0.5)
        counted = server_requests(url)
    return counted


def log_errors(path: Path) -> list[str]:
    return [line for line in path.read_text(errors="replace").splitlines() if LOG_ERROR.search(line)]


# -- the criteria ----------------------------------------------------------------------------


@dataclass
class Findings:
    """What a soak saw, on both sides; ``CRITERIA`` judge it."""

    soak: Soak
    counted: Counter[tuple[str, str]]  # the server's requests by (route, status)
    memory: list[dict]  # ``benchmarks.rss.summaries``: each process, then all together
    log_errors: list[str]
    exit_code: int


Criterion = tuple[str, bool | None, str]  # name, passed (None: not judged), detail


def answered(f: Findings) -> Criterion:
    missing = f.soak.tally.total(NO_ANSWER)
    detail = f"{missing} of {f.soak.tally.total()} unanswered"
    return "every request waited for was answered (no transport error, no hang)", missing == 0, detail


def expected_statuses(f: Findings) -> Criterion:
    wrong = {key: n for key, n in f.soak.tally.unexpected.items() if key[2] != NO_ANSWER}
    detail = ", ".join(f"{kind} {path} {outcome}: {n}" for (kind, path, outcome), n in wrong.items()) or "none other"
    return "every answer has a status its request expects", not wrong, detail


def kinds_seen(f: Findings) -> Criterion:
    missing = {kind: sorted(spec.must_see - f.soak.tally.seen(kind)) for kind, spec in KINDS.items()}
    detail = "; ".join(f"{kind}: no {', '.join(v)}" for kind, v in missing.items() if v) or "all seen"
    return "every kind got each of its expected statuses", not any(missing.values()), detail


def floods_refused(f: Findings) -> Criterion:
    floods = f.soak.floods
    unrefused = [flood["number"] for flood in floods if not flood["refused"]]
    detail = f"{len(floods)} floods" + (f", no 429 in {unrefused}" if unrefused else ", each with 429s")
    return "every flood was partly refused (429)", bool(floods) and not unrefused, detail


def server_counted(f: Findings) -> Criterion:
    sent = f.soak.tally.by_path()
    counted = per_route(f.counted, sent)
    detail = ", ".join(f"{path}: {counted[path]} of {n}" for path, n in sorted(sent.items()))
    return "the server counted every request sent", counted == sent, detail


def server_5xx(f: Findings) -> Criterion:
    paths = f.soak.tally.by_path()
    found = Counter({status: n for (route, status), n in f.counted.items() if route in paths and int(status) >= 500})
    unintended = sum(n for status, n in found.items() if status != "504") + max(
        0, found["504"] - f.soak.tally.total("504")
    )
    detail = ", ".join(f"{status}: {n}" for status, n in sorted(found.items())) or "none"
    return "no 5xx from the server but the deadlines' 504s", unintended == 0, detail


def log_clean(f: Findings) -> Criterion:
    detail = f"{len(f.log_errors)} lines" + (f", the first: {f.log_errors[0]}" if f.log_errors else "")
    return "no error or traceback in the service's log", not f.log_errors, detail


def clean_exit(f: Findings) -> Criterion:
    return "the service exited 0 on SIGTERM", f.exit_code == 0, f"exit code {f.exit_code}"


def same_processes(f: Findings) -> Criterion:
    *processes, total = f.memory
    partial = [p["pid"] for p in processes if p["first_s"] != total["first_s"] or p["last_s"] != total["last_s"]]
    detail = f"{len(processes)} processes" + (f"; not there throughout: {partial}" if partial else "")
    return "the same processes from the first sample to the last", not partial, detail


def rss_growth(f: Findings) -> Criterion:
    name = f"RSS growth after warm-up < {MAX_GROWTH:.0%} in each process"
    growths = [p["growth"] for p in f.memory]
    if None in growths:
        args = f.soak.args
        span = args.warmup_s + 2 * args.window_s
        return name, None, f"not judged: {args.duration_s:g} s is shorter than warm-up + 2 windows ({span:g} s)"
    return name, max(growths) < MAX_GROWTH, f"largest {max(growths):+.1%}"


CRITERIA: tuple[Callable[[Findings], Criterion], ...] = (
    answered,
    expected_statuses,
    kinds_seen,
    floods_refused,
    server_counted,
    server_5xx,
    log_clean,
    clean_exit,
    same_processes,
    rss_growth,
)


# -- the report ------------------------------------------------------------------------------


def mb(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def outcome_list(counts: dict[str, int]) -> str:
    return ", ".join(f"{outcome}: {n}" for outcome, n in sorted(counts.items()))


def requests_table(tally: Tally) -> str:
    rows = []
    for kind, path in sorted(tally.expected, key=lambda key: (list(KINDS).index(key[0]), key[1])):
        counts = {outcome: n for (k, p, outcome), n in tally.counts.items() if (k, p) == (kind, path)}
        unexpected = sum(n for (k, p, _), n in tally.unexpected.items() if (k, p) == (kind, path))
        rows.append([kind, path, sum(counts.values()), outcome_list(counts),
                     ", ".join(sorted(tally.expected[kind, path])), unexpected])  # fmt: skip
    header = ["kind", "route", "requests", "outcomes", "expected", "unexpected"]
    return markdown_table(header, [*rows, ["all", "", tally.total(), "", "", sum(tally.unexpected.values())]])


def server_table(counted: Counter[tuple[str, str]], paths: dict[str, int]) -> str:
    rows = [[path, n, outcome_list({s: c for (r, s), c in counted.items() if r == path})] for path, n in paths.items()]
    return markdown_table(["route", "requests", "statuses"], rows)


def floods_line(floods: list[dict]) -> str:
    if not floods:
        return "No flood."
    median = {key: statistics.median(f[key] for f in floods) for key in ("requests", "refused", "seconds")}
    return (f"{len(floods)} floods, alternately en-de and de-en; per flood (median): {median['requests']:g} "
            f"requests, {median['refused']:g} refused (429), {median['seconds']:.1f} s; fewest refused: "
            f"{min(f['refused'] for f in floods)}.")  # fmt: skip


def memory_table(memory: list[dict]) -> str:
    rows = [[p["role"], p["pid"] or "", mb(p["start_mb"]), mb(p["warmup_mb"]), mb(p["final_mb"]), mb(p["peak_mb"]),
             "n/a" if p["growth"] is None else f"{p['growth']:+.1%}"] for p in memory]  # fmt: skip
    return markdown_table(["process", "pid", "start", "warm-up", "final", "peak", "growth"], rows)


def series_table(memory: list[dict]) -> str:
    """RSS of each process at up to ``SERIES_ROWS`` evenly spaced sample times."""
    times = [at for at, _ in memory[-1]["series"]]
    stride = max(1, math.ceil(len(times) / (SERIES_ROWS - 1)))
    shown = sorted({*times[::stride], times[-1]})
    columns = [dict(p["series"]) for p in memory]
    header = ["s", *(f"{p['role']} {p['pid']}" if p["pid"] else "all" for p in memory)]
    return markdown_table(header, [[f"{at:g}", *(mb(c.get(at)) for c in columns)] for at in shown])


def markdown(f: Findings, criteria: list[Criterion], windows: Windows) -> str:
    verdict = {True: "pass", False: "**FAIL**", None: "not judged"}
    checks = markdown_table(["criterion", "result", "detail"], [[n, verdict[p], d] for n, p, d in criteria])
    paths = f.soak.tally.by_path()
    memory_note = (f"RSS in MB; warm-up: median of {windows.warmup_s:g}–{windows.warmup_s + windows.window_s:g} s, "
                   f"final: median of the last {windows.window_s:g} s.")  # fmt: skip
    return "\n\n".join([
        f"### Criteria\n\n{checks}",
        f"### Requests by kind and outcome (client side)\n\n{requests_table(f.soak.tally)}\n\n"
        f"{floods_line(f.soak.floods)}",
        f"### Requests by route and status (server side, mt_requests_total)\n\n{server_table(f.counted, paths)}",
        f"### Resident memory\n\n{memory_note}\n\n{memory_table(f.memory)}",
        f"### RSS series (MB)\n\n{series_table(f.memory)}",
    ])  # fmt: skip


def report(f: Findings, windows: Windows, limits: Limits) -> dict:
    criteria = [check(f) for check in CRITERIA]
    tally = f.soak.tally
    return {
        "settings": settings_record(f.soak.args),
        "limits": vars(limits),
        "passed": all(passed is not False for _, passed, _ in criteria),
        "criteria": [{"criterion": n, "passed": p, "detail": d} for n, p, d in criteria],
        "requests": [
            {"kind": k, "route": p, "outcome": o, "count": n, "expected": sorted(tally.expected[k, p])}
            for (k, p, o), n in sorted(tally.counts.items())
        ],
        "server_requests": [{"route": r, "status": s, "count": n} for (r, s), n in sorted(f.counted.items())],
        "floods": f.soak.floods,
        "memory": f.memory,
        "log_errors": f.log_errors[:20],
        "markdown": markdown(f, criteria, windows),
    }


# -- the entry point -------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, help="how long the traffic runs (default 30)")
    length.add_argument("--seconds", type=float, help="the same in seconds")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="Multi30K: train.en and train.de")
    parser.add_argument("--models-dir", type=Path, help="MT_MODELS_DIR (default: the service's, models/)")
    parser.add_argument("--clients", type=int, default=4, help="closed-loop clients of the steady mix")
    parser.add_argument("--flood-every-s", type=float, default=60.0, help="seconds between floods")
    parser.add_argument("--sample-every-s", type=float, default=10.0, help="seconds between RSS samples")
    parser.add_argument("--warmup-s", type=float, default=180.0, help="seconds of warm-up before RSS is compared")
    parser.add_argument("--window-s", type=float, default=60.0, help="seconds of samples at warm-up and at the end")
    parser.add_argument("--seed", type=int, default=0, help="of the traffic's random choices")
    parser.add_argument("--workdir", type=Path, default=RUNS / "soak", help="the service's log")
    parser.add_argument("--out", type=Path, default=RESULTS / "soak.json", help="the result file")
    args = parser.parse_args(argv)
    args.duration_s = args.seconds if args.seconds is not None else 60 * (args.minutes or 30.0)
    require_paths(parser, [args.data / "train.en", args.data / "train.de"])
    if args.models_dir is not None:
        require_paths(parser, [args.models_dir])
    if min(args.duration_s, args.flood_every_s, args.sample_every_s, args.window_s) <= 0 or args.clients < 1:
        parser.error("durations must be > 0 and --clients >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """0 when every criterion passed (or could not be judged), else 1."""
    start = start_run("benchmarks.soak", argv)
    args = parse_args(start.argv)
    limits = Limits.of_default_service()
    sentences = {lang: read_lines(args.data / f"train.{lang}") for lang in ("en", "de")}
    settings = {} if args.models_dir is None else {"MT_MODELS_DIR": str(args.models_dir.resolve())}
    service = LiveService(settings, args.workdir / "service.log")
    with service:
        soak = Soak(service.url, Traffic(sentences, limits, args.seed), ProcessTree(service.process.pid), args)
        uvloop.run(soak.run())
        counted = settled_server_requests(service.url, soak.tally.by_path())
    windows = Windows(args.warmup_s, args.window_s, args.duration_s)
    memory = summaries(soak.tree, windows)
    findings = Findings(soak, counted, memory, log_errors(service.log_path), service.process.returncode)
    result = report(findings, windows, limits)
    write_report(start, args.out, result)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
