"""Draws docs/benchmarks.png from docs/benchmarks.json (written by `cargo xtask bench`).

Usage: chart.py BENCHMARKS_JSON PNG MODEL
Left: messages per second by mode and workload (one container, batches of 10, with the simulated
network of MODEL, `calibrated` or `flat`). Right: write request units and requests per message on all-new messages.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src, dst, model = sys.argv[1], sys.argv[2], sys.argv[3]
summary = [r for r in json.load(open(src))["summary"] if "workload" in r]
workloads = ["all_new", "half_duplicates", "mixed", "all_duplicates"]
modes = ["powertools", "per_message", "batch_transaction", "batch_transaction_prefilter",
         "batch_transaction_warm_cache", "sequence", "create_once"]
colors = ["#999999", "#4e79a7", "#f28e2b", "#edc948", "#59a14f", "#b07aa1", "#e15759"]


def pick(mode, workload, key, batch=10):
    for r in summary:
        if (r["mode"], r["workload"], r.get("model"), r["batch"], r["containers"]) == (
            mode, workload, model, batch, 1):
            return r[key]
    return 0


fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [3, 2]})
width = 0.13
for i, mode in enumerate(modes):
    values = [pick(mode, w, "msgs_per_s") for w in workloads]
    xs = [j + (i - 2.5) * width for j in range(len(workloads))]
    bars = left.bar(xs, values, width, label=mode.replace("_", " "), color=colors[i])
    left.bar_label(bars, labels=[f"{v:,.0f}" for v in values], fontsize=7, padding=2)
left.set_yscale("log")
left.set_xticks(range(len(workloads)), [w.replace("_", " ") for w in workloads])
left.set_ylabel("messages / s (log scale, median)")
left.set_title(f"Throughput, batches of 10, {model} latency")
left.legend(loc="upper left", fontsize=8)

xs = range(len(modes))
wcu = [pick(m, "all_new", "wcu_per_msg") for m in modes]
calls = [pick(m, "all_new", "calls_per_msg") for m in modes]
b1 = right.bar([x - 0.2 for x in xs], wcu, 0.4, label="write units / msg", color="#e15759")
b2 = right.bar([x + 0.2 for x in xs], calls, 0.4, label="requests / msg", color="#76b7b2")
right.bar_label(b1, labels=[f"{v:.2f}" for v in wcu], fontsize=7, padding=2)
right.bar_label(b2, labels=[f"{v:.2f}" for v in calls], fontsize=7, padding=2)
right.set_xticks(list(xs), [m.replace("_", "\n") for m in modes], fontsize=7)
right.set_title("Cost per new message (batches of 10)")
right.legend(fontsize=8)
fig.tight_layout()
fig.savefig(dst, dpi=110)
