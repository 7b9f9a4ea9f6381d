"""The service's throughput as a share of the offline engine's, measured interleaved.

    python -m benchmarks.ratio [--rounds 2] [--setting 2:5 --setting 2:5:2] [--concurrency 64]

``benchmarks/load.py`` measures the offline engine once and then the service for a few minutes; on
a VM whose speed drifts (steal time), the ratio then compares two different machines. Here each
round measures, for every setting (``THREADS:MAX_WAIT_MS[:STREAMS]``), the offline engine, right
after it the service at one concurrency (batching on), and the offline engine again: the service is
compared with the mean of the two offline runs that bracket it, so that a drift in either direction
biases neither. It reports each round's ratio and the medians: over all rounds, and over the quiet
ones, where the steal time (CPU the VM's host gave to others) stayed at or under ``--max-steal``
percent of a core during all three measurements.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from benchmarks import load
from benchmarks.common import markdown_table, read_lines, write_json


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    help = "THREADS:MAX_WAIT_MS[:STREAMS] (repeatable; default 2:5 and 2:5:2)"
    parser.add_argument("--setting", action="append", help=help)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-steal", type=float, default=5.0, help="steal %% of a round counted as quiet")
    parser.add_argument("--json", type=Path, help="write the results here")
    args, load_args = parser.parse_known_args(argv)
    rows, ratios, quiet = [], {}, {}
    for round_ in range(args.rounds):
        for setting in args.setting or ["2:5", "2:5:2"]:
            threads, wait, streams = [*setting.split(":"), "1"][:3]
            options = load.parse_args(
                [*load_args, "--concurrency", str(args.concurrency), "--threads", threads, "--max-wait-ms", wait]
                + ["--streams", streams]
            )
            texts = read_lines(options.src, options.limit)
            before = load.offline_throughput(texts, options)
            level = load.run_mode(texts, options, batching=True)[0]
            after = load.offline_throughput(texts, options)
            offline = (before["throughput"] + after["throughput"]) / 2
            ratio = level["throughput"] / offline
            ratios.setdefault(setting, []).append(ratio)
            if max(before["steal_percent"], after["steal_percent"], level["cpu_percent"]["steal"]) <= args.max_steal:
                quiet.setdefault(setting, []).append(ratio)
            p99_ms, batch = level["p99_s"] * 1000, level["mean_batch_sentences"]
            rows.append([round_, setting, f"{before['throughput']:.1f} / {after['throughput']:.1f}",
                         f"{before['steal_percent']:.0f} / {after['steal_percent']:.0f}",
                         f"{level['throughput']:.1f}", f"{ratio:.2f}", f"{p99_ms:.0f}", level["errors"], f"{batch:.1f}",
                         load.cpu_split(level)])  # fmt: skip
    header = ["round", "threads:wait:streams", "offline sent/s before / after", "offline steal %", "service sent/s",
              "ratio", "p99 ms", "errors", "batch", "CPU % HTTP/engine/clients/idle/steal"]  # fmt: skip
    table = markdown_table(header, rows)
    medians = {setting: statistics.median(values) for setting, values in ratios.items()}
    quiet_medians = {setting: statistics.median(values) for setting, values in quiet.items()}
    write_json(args.json, {"table": table, "median_ratio": medians, "quiet_median_ratio": quiet_medians})
    print(table)
    for setting, median in medians.items():
        in_quiet = f"{quiet_medians[setting]:.2f} over {len(quiet[setting])}" if setting in quiet else "none"
        print(f"{setting}: median ratio {median:.2f}; quiet rounds (steal <= {args.max_steal:g}%): {in_quiet}")


if __name__ == "__main__":
    main()
