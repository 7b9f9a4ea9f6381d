"""Reproduce the suite behind ``benchmarks/RESULTS.md``: ``python -m benchmarks.run_all``.

Runs the engine benchmark twice (every system with its 2 threads in one stream, then our engine
and CTranslate2 with 2 streams of 1 thread: ``STREAMS``), the load test twice (one stream of 2
threads, then ``TWO_STREAMS``: 2 streams of 1 thread, what ``MT_STREAMS=0``, the default, picks on
2 cores) and the plot, with the shipped checkpoint and bundle on test_2016_flickr, writing
``benchmarks/results/*.json``, ``benchmarks/results/tables.md`` and ``benchmarks/load.png``. Extra
arguments after ``--engine`` or ``--load`` go to that script (both runs), e.g. ``--engine --rounds
1 --load --duration 10``. Takes about 25 minutes on a 2-core CPU; run it on an otherwise idle
machine. The interleaved service/offline ratio (``benchmarks.ratio``) and the batch-composition
benchmark (``benchmarks.composition``) run on their own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks import engine, load, plot
from benchmarks.common import machine

RESULTS = Path("benchmarks/results")
STREAMS = ["--streams", "2", "--systems", "ours-fp32", "ours-int8", "ct2-float32", "ct2-int8"]
TWO_STREAMS = ["--streams", "2"]


def split_args(argv: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {"--engine": [], "--load": []}
    current = None
    for arg in argv:
        if arg in groups:
            current = arg
        elif current is None:
            sys.exit(f"error: {arg!r}: put script arguments after --engine or --load")
        else:
            groups[current].append(arg)
    return groups


def load_section(title: str, report: dict) -> str:
    offline = report["offline"]
    return (
        f"## {title}\n\nOffline engine: {offline['throughput']:.1f} sentences/s "
        f"({offline['sentences']} sentences in {offline['seconds']:.1f} s)\n\n{report['table']}\n"
    )


def tables_markdown(engine_report: dict, streams_report: dict, load_report: dict, two_streams_report: dict) -> str:
    m = machine()
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    return (
        f"Machine: {m['cpu']}, {m['cores']} cores; {m['platform']}\n\nVersions: {versions}\n\n"
        + "".join(
            f"## Engine (test_2016_flickr, {report['settings']})\n\n{report['table']}\n\n"
            for report in (engine_report, streams_report)
        )
        + load_section("Service load test, 1 stream of 2 threads", load_report)
        + "\n"
        + load_section("Service load test, 2 streams of 1 thread (the default on 2 cores)", two_streams_report)
    )


def main(argv: list[str] | None = None) -> None:
    groups = split_args(sys.argv[1:] if argv is None else argv)
    paths = [RESULTS / name for name in ("engine.json", "engine_streams.json", "load.json", "load_streams.json")]
    engine.main([*groups["--engine"], "--json", str(paths[0])])
    engine.main([*groups["--engine"], *STREAMS, "--json", str(paths[1])])
    load.main([*groups["--load"], "--json", str(paths[2])])
    load.main([*groups["--load"], *TWO_STREAMS, "--json", str(paths[3])])
    plot.main(["--load-json", str(paths[2]), str(paths[3]), "--out", "benchmarks/load.png"])
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    (RESULTS / "tables.md").write_text(tables_markdown(*reports), encoding="utf-8")
    print(f"wrote {RESULTS / 'tables.md'}")


if __name__ == "__main__":
    main()
