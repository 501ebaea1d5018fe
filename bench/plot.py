#!/usr/bin/python3
"""Time-to-wire distributions (CDF per implementation and variant) of one bench result file,
and the datapath ratio when the run has one. Usage: plot.py RESULT.json OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    run = json.load(open(src))
    wire = [r for r in run["records"] if r.get("samples_s")]
    dp = [r for r in run["records"] if r["scenario"] == "datapath" and r.get("extra", {}).get("sizes")]
    panels = 1 + (1 if dp else 0)
    fig, axes = plt.subplots(1, panels, figsize=(7 * panels, 4.5), squeeze=False)
    ax = axes[0][0]
    for r in wire:
        xs = sorted(r["samples_s"])
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        style = "-" if r["implementation"] == "kuryr-rs" else "--"
        ax.step(xs, ys, style, where="post",
                label=f'{r["scenario"]} {r["implementation"]} {r["variant"]} (n={len(xs)})')
    ax.axvline(5.0, color="grey", linewidth=0.8, linestyle=":")
    ax.text(5.0, 0.02, " 5 s SLO", color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("pod created -> KuryrPort wired (s, log)")
    ax.set_ylabel("fraction of pods")
    ax.set_title(f'time-to-wire, run {run["run_id"]} ({run["commit"]["sha"][:10]}, time-scale {run["time_scale"]})')
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    if dp:
        ax = axes[0][1]
        for r in dp:
            sizes = r["extra"]["sizes"]
            xs = [s["bytes"] for s in sizes]
            ax.plot(xs, [s.get("throughput_ratio") for s in sizes], "o-", label="throughput: OVN / overlay")
            ax.plot(xs, [s.get("rr_latency_ratio") for s in sizes], "s--", label="RR latency: overlay / OVN")
        ax.set_xscale("log", base=2)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("ratio (>1: cloud network ahead)")
        ax.set_title("datapath: pods on OVN vs VXLAN overlay over OVN")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
