#!/usr/bin/python3
"""Plots of one bench result file: the time-to-wire distributions (CDF per implementation and variant)
when the run has time-to-wire samples, and the datapath ratios per message size when it has a datapath
ratio record. Usage: plot.py RESULT.json TIME_TO_WIRE.png [DATAPATH.png]
(DATAPATH.png defaults to benchmarks-datapath.png next to TIME_TO_WIRE.png). A figure whose records are
absent is not drawn, so a run of one scenario never overwrites the other's plot."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def time_to_wire(run, wire, dst):
    fig, ax = plt.subplots(figsize=(10.5, 4.5))
    for r in wire:
        xs = sorted(r["samples_s"])
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        style = {"kuryr-rs": "-", "floor": ":"}.get(r["implementation"], "--")
        ax.step(xs, ys, style, where="post",
                label=f'{r["scenario"]} {r["implementation"]} {r["variant"]} (n={len(xs)})')
    ax.axvline(5.0, color="grey", linewidth=0.8, linestyle=":")
    ax.text(5.0, 0.02, " 5 s SLO", color="grey")
    ax.set_xscale("log")
    ax.set_xlabel("pod created -> KuryrPort wired (s, log)")
    ax.set_ylabel("fraction of pods")
    ax.set_title(f'time-to-wire, run {run["run_id"]} ({run["commit"]["sha"][:10]}, time-scale {run["time_scale"]})')
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


def label_sizes(ax, xs):
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [f"{x} B" if x < 1024 else f"{x // 1024} KiB" for x in xs])
    ax.minorticks_off()


def datapath(run, ratio, dst):
    sizes = ratio["extra"]["sizes"]
    xs = [s["bytes"] for s in sizes]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    ax.plot(xs, [s.get("throughput_ratio") for s in sizes], "o-", label="TCP throughput: OVN direct / overlay")
    ax.plot(xs, [s.get("rr_latency_ratio") for s in sizes], "s--", label="TCP RR latency p50: overlay / OVN direct")
    ax.plot(xs, [s.get("rr_p99_ratio") for s in sizes], "^:", label="TCP RR latency p99: overlay / OVN direct")
    label_sizes(ax, xs)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("ratio (>1: pods on the cloud network ahead)")
    ax.set_title("pods on OVN (Kuryr) vs VXLAN overlay in the VMs over OVN")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax2.plot(xs, [s.get("direct_mbps") for s in sizes], "o-", label="OVN direct")
    ax2.plot(xs, [s.get("overlay_mbps") for s in sizes], "s--", label="VXLAN overlay")
    label_sizes(ax2, xs)
    ax2.set_xlabel("message size (bytes)")
    ax2.set_ylabel("TCP throughput (Mbit/s)")
    ax2.set_title(f'absolute throughput, run {run["run_id"]} ({run["commit"]["sha"][:10]})')
    ax2.grid(True, alpha=0.3)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


def main(src, dst, dp_dst=None):
    run = json.load(open(src))
    # Pod time-to-wire only (the services records' samples are Service time-to-ready).
    # A repeated record keeps each repeat's samples in its repeats: every pod of every repeat is drawn.
    for r in run["records"]:
        if not r.get("samples_s") and r.get("repeats"):
            r["samples_s"] = [x for rep in r["repeats"] for x in rep.get("samples_s", [])]
    wire = [r for r in run["records"] if r.get("samples_s") and r["scenario"] in ("burst", "churn")]
    ratios = [r for r in run["records"]
              if r["scenario"] == "datapath" and r.get("extra", {}).get("sizes")]
    if wire:
        time_to_wire(run, wire, dst)
    if ratios:
        datapath(run, ratios[0], dp_dst or os.path.join(os.path.dirname(dst), "benchmarks-datapath.png"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
