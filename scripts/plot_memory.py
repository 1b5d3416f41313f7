#!/usr/bin/python3
"""Draws a memory snapshot (gpt2_train --memory-snapshot; ch07_memory/memory_snapshot.h) as a PNG: live bytes
by category over the step, stacked, as PyTorch's memory snapshot viewer shows them, with the peak marked and
the ops that hold the most activation bytes at that moment listed.

    scripts/plot_memory.py snapshot.json --out snapshot.png [--title "GPT-2 d12, B=4, T=64"]

The events are replayed from the live bytes at the start of the recording; the peak of the replay is checked
against the allocator's own peak recorded in the file. Needs matplotlib (Debian: python3-matplotlib,
for the /usr/bin/python3 that runs the script).
"""
import argparse
import json
import os
import sys

try:
    import matplotlib
except ModuleNotFoundError:
    sys.exit(f"{os.path.basename(sys.argv[0])}: needs matplotlib, which {sys.executable} does not have: install it "
             "(Debian: apt-get install python3-matplotlib) or run the script with a python3 that has it "
             "(e.g. /usr/bin/python3)")

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402  (must follow the backend choice)

MIB = 1024.0 * 1024.0


def fail(message):
    print(f"plot_memory.py: {message}", file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        with open(path) as f:
            snapshot = json.load(f)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"{path} is not JSON: {e}")
    for key in ("memory_snapshot", "categories", "start_live", "allocator_peak", "ops", "events"):
        if key not in snapshot:
            fail(f"{path} is not a memory snapshot: no '{key}'")
    return snapshot


def replay(snapshot):
    """Live bytes per category after each event, the time of each event (ms), the peak's index, and the
    activation bytes each op holds at the peak."""
    categories = snapshot["categories"]
    live = list(snapshot["start_live"])
    times, series = [0.0], [list(live)]
    peak_total, peak_index = sum(live), 0
    held = {}  # address -> (bytes, category, op) of allocations made during the recording and not yet freed
    held_at_peak = dict(held)
    for t_us, sign, nbytes, category, op, address in snapshot["events"]:
        live[category] += sign * nbytes
        if sign > 0:
            held[address] = (nbytes, category, op)
        else:
            held.pop(address, None)
        times.append(t_us / 1000.0)
        series.append(list(live))
        if sum(live) > peak_total:
            peak_total, peak_index, held_at_peak = sum(live), len(series) - 1, dict(held)
    if peak_total != snapshot["allocator_peak"]:
        fail(f"the events replay to a peak of {peak_total} bytes, the allocator recorded {snapshot['allocator_peak']}")
    by_op = {}
    activations = categories.index("activations")
    for nbytes, category, op in held_at_peak.values():
        if category == activations:
            by_op[snapshot["ops"][op]] = by_op.get(snapshot["ops"][op], 0) + nbytes
    return categories, times, series, peak_index, by_op


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot", help="the JSON file gpt2_train --memory-snapshot wrote")
    parser.add_argument("--out", required=True, help="PNG to write (refuses to overwrite a file that is not a PNG)")
    parser.add_argument("--title", default="", help="what the step was (model, batch, recompute policy)")
    args = parser.parse_args()
    if os.path.exists(args.out):
        with open(args.out, "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                fail(f"refusing to overwrite '{args.out}': it is not a PNG")

    snapshot = load(args.snapshot)
    categories, times, series, peak_index, by_op = replay(snapshot)
    shown = [i for i, _ in enumerate(categories) if any(s[i] for s in series)]
    fig, ax = plt.subplots(figsize=(10, 5))
    ax.stackplot(times, [[s[i] / MIB for s in series] for i in shown], labels=[categories[i] for i in shown],
                 step="post")
    peak_mib = sum(series[peak_index]) / MIB
    ax.axvline(times[peak_index], color="black", linewidth=0.8, linestyle="--")
    ax.annotate(f"peak {peak_mib:.0f} MiB", (times[peak_index], peak_mib), textcoords="offset points",
                xytext=(5, 5))
    top = sorted(by_op.items(), key=lambda kv: -kv[1])[:6]
    if top:
        text = "activations at the peak, by op that allocated them:\n" + "\n".join(
            f"  {op}: {nbytes / MIB:.1f} MiB" for op, nbytes in top)
        ax.text(0.01, 0.02, text, transform=ax.transAxes, fontsize=8, family="monospace", verticalalignment="bottom",
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
    ax.set_xlabel("time in the step (ms)")
    ax.set_ylabel("live MiB")
    title = f"memory over one step on {snapshot.get('device', '?')}"
    ax.set_title(f"{title}: {args.title}" if args.title else title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"plot_memory.py: wrote {args.out} ({len(snapshot['events'])} events, peak {peak_mib:.1f} MiB)")


if __name__ == "__main__":
    main()
