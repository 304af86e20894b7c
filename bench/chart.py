"""Draws docs/benchmarks.png from docs/benchmarks.json (written by `cargo xtask bench`)."""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src, dst = sys.argv[1], sys.argv[2]
results = [r for r in json.load(open(src)) if "workload" in r]
workloads = ["all_new", "half_duplicates", "all_duplicates"]
modes = ["powertools", "per_message", "batch_transaction", "batch_transaction_warm_cache"]
colors = ["#999999", "#4e79a7", "#f28e2b", "#59a14f"]

fig, ax = plt.subplots(figsize=(10, 5.5))
width = 0.2
for i, mode in enumerate(modes):
    values = []
    for w in workloads:
        match = [r["msgs_per_s"] for r in results if r["mode"] == mode and r["workload"] == w]
        values.append(match[0] if match else 0)
    xs = [j + (i - 1.5) * width for j in range(len(workloads))]
    bars = ax.bar(xs, values, width, label=mode.replace("_", " "), color=colors[i])
    ax.bar_label(bars, labels=[f"{v:,.0f}" for v in values], fontsize=8, padding=2)
ax.set_yscale("log")
ax.set_xticks(range(len(workloads)), [w.replace("_", " ") for w in workloads])
ax.set_ylabel("messages / s (log scale)")
ax.set_title("Deduplicated SQS batches of 10 on Dynoxide (local DynamoDB): lambda-dedup vs AWS Powertools")
ax.legend(loc="upper left", fontsize=9)
fig.tight_layout()
fig.savefig(dst, dpi=110)
