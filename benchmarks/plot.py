"""The service benchmark as a figure: throughput and p99 latency against concurrency, per stream
setting, batching on and off, with the offline engine's throughput; drawn by ``benchmarks.run_all``."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt

from benchmarks.common import streams_title

COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def plot_service(report: dict, out: Path) -> Path:
    """Two panels; a line per stream setting and batching mode, the offline engine dotted."""
    fig, (ax_tput, ax_p99) = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
    threads = report["settings"]["threads"]
    streams = list(dict.fromkeys(setup["streams"] for setup in report["setups"]))
    for setup in report["setups"]:
        color = COLORS[streams.index(setup["streams"]) % len(COLORS)]
        style = "o-" if setup["batching"] == "on" else "s--"
        title = streams_title(setup["streams"], threads)
        rows = setup["summary"]
        clients = [row["concurrency"] for row in rows]
        p99 = [float("nan") if row["p99_s"] is None else row["p99_s"] * 1000 for row in rows]
        label = f"{title}, batching {setup['batching']}"
        ax_tput.plot(clients, [row["throughput"] for row in rows], style, color=color, label=label)
        ax_p99.plot(clients, p99, style, color=color, label=label)
        if setup["batching"] == "on":
            offline = statistics.median(row["offline"] for row in rows)
            ax_tput.axhline(offline, color=color, linestyle=":", label=f"{title}, offline engine")
    ax_tput.set(title="Throughput", xlabel="concurrent clients", ylabel="sentences / s")
    ax_p99.set(title="p99 latency", xlabel="concurrent clients", ylabel="ms", yscale="log")
    for ax in (ax_tput, ax_p99):
        ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    beam, cpu = report["settings"]["beam_size"], report["run"]["machine"]["cpu_model"]
    fig.suptitle(f"Service under load: one test sentence per request, beam {beam} ({cpu})")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
