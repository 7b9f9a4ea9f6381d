"""Plot the load test: throughput and p99 latency against concurrency, batching on vs off.

python -m benchmarks.plot --load-json benchmarks/results/load.json --out benchmarks/load.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt


def plot(report: dict, out: Path) -> Path:
    fig, (ax_tput, ax_p99) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for mode, style in (("on", "o-"), ("off", "s--")):
        levels = sorted((lv for lv in report["levels"] if lv["batching"] == mode), key=lambda lv: lv["concurrency"])
        if not levels:
            continue
        clients = [lv["concurrency"] for lv in levels]
        label = f"batching {mode}"
        ax_tput.plot(clients, [lv["throughput"] for lv in levels], style, label=label)
        p99 = [lv["p99_s"] * 1000 if lv["p99_s"] is not None else float("nan") for lv in levels]
        ax_p99.plot(clients, p99, style, label=label)
    offline = report["offline"]["throughput"]
    ax_tput.axhline(offline, color="grey", linestyle=":", label="offline engine")
    ax_tput.set(title="Throughput", xlabel="concurrent clients", ylabel="sentences / s")
    ax_p99.set(title="p99 latency", xlabel="concurrent clients", ylabel="ms", yscale="log")
    for ax in (ax_tput, ax_p99):
        ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    settings, cpu = report["settings"], report["machine"]["cpu"]
    fig.suptitle(f"Service load test, beam {settings['beam_size']}, {settings['threads']} threads ({cpu})")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--load-json", type=Path, default=Path("benchmarks/results/load.json"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/load.png"))
    args = parser.parse_args(argv)
    if not args.load_json.is_file():
        parser.error(f"{args.load_json} not found: run `python -m benchmarks.load --json {args.load_json}` first")
    print(f"wrote {plot(json.loads(args.load_json.read_text(encoding='utf-8')), args.out)}")


if __name__ == "__main__":
    main()
