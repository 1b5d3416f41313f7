#!/usr/bin/python3
"""Draws bench results (common/bench/result.h) as a bar chart PNG, or training logs as curves.

With a row column as --metric (e.g. "ms" of rows {"stage": "v1 naive", "ms": 41.0}), it draws one group of
bars per stage (the rows' label, their first member) and one bar per result file, so the stages of one
run, or of several runs side by side, can be compared at a glance. With a top-level metric as --metric
(e.g. "step_ms"), it draws one bar per file at the median with the min..max range as an error bar.
The machine of each file is named in the title.

The files may instead be gpt2_train JSON logs (--log-json; ch10_gpt2/train_log.h): then --metric names a
field of their records ("loss", "val_loss", "ms", "lr", "grad_norm", "tokens_per_s", ...) and each log is
drawn as one curve of that field against the step, so two training runs can be compared at a glance.

    scripts/plot_bench.py before.json after.json --metric ms --out stages.png
    scripts/plot_bench.py run1.jsonl run2.jsonl --metric loss --out loss.png

Needs matplotlib (Debian: python3-matplotlib, for the /usr/bin/python3 that runs the script).
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


def load(path):
    """A bench result (a dict with "bench", "metrics", ...) or a training log (a dict with "log" and "records")."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"plot_bench.py: error: cannot read '{path}': {e.strerror}")
    try:
        first = json.loads(text.split("\n", 1)[0])
    except json.JSONDecodeError:
        first = None
    if isinstance(first, dict) and "log" in first:
        return load_log(path, text)
    try:
        result = json.loads(text)
    except json.JSONDecodeError as e:
        sys.exit(f"plot_bench.py: error: '{path}' is not valid JSON: {e}")
    for key in ("bench", "machine", "metrics", "rows"):
        if key not in result:
            sys.exit(f"plot_bench.py: error: '{path}' is not a bench result: missing key '{key}'")
    return result


def load_log(path, text):
    """A gpt2_train log: its first header (a resumed run appends another) and its step and evaluation records."""
    header, records = None, []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"plot_bench.py: error: '{path}' line {number} is not valid JSON: {e}")
        if "log" in record:
            header = header or record
        elif "step" in record:
            records.append(record)
    return {"log": header["log"], "machine": header["machine"], "records": records}


def machine_summary(m):
    """The same one-line description as MachineInfo::summary() in C++."""
    text = f"{m['cpu_model']} ({m['cpu_cores']} cores, {m['memory_bytes'] / 2**30:.1f} GiB)"
    return text + (f", {m['gpu_count']} x {m['gpu_name']}" if m.get("gpu_count", 0) else ", no GPU")


def label_of(row):
    value = next(iter(row.values()))
    return value if isinstance(value, str) else json.dumps(value)


def unit_of(results, metric):
    for r in results:
        described = r.get("columns", {}).get(metric) or r["metrics"].get(metric)
        if described:
            return described.get("unit", ""), described.get("better", "lower")
    return "", None


def plot_stages(ax, results, names, metric):
    stages = []
    for r in results:
        for row in r["rows"]:
            if metric in row and label_of(row) not in stages:
                stages.append(label_of(row))
    width = 0.8 / len(results)
    for i, (r, name) in enumerate(zip(results, names)):
        values = {label_of(row): row[metric] for row in r["rows"] if isinstance(row.get(metric), (int, float))}
        xs = [s + i * width - 0.4 + width / 2 for s in range(len(stages)) if stages[s] in values]
        ys = [values[stage] for stage in stages if stage in values]
        bars = ax.bar(xs, ys, width, label=name)
        ax.bar_label(bars, fmt="%.3g", fontsize=8)
    ax.set_xticks(range(len(stages)))
    ax.set_xticklabels(stages, rotation=20, ha="right")


def plot_metric(ax, results, names, metric):
    medians = [r["metrics"][metric]["median"] for r in results]
    below = [m - r["metrics"][metric]["min"] for m, r in zip(medians, results)]
    above = [r["metrics"][metric]["max"] - m for m, r in zip(medians, results)]
    bars = ax.bar(range(len(results)), medians, 0.6, yerr=[below, above], capsize=6)
    ax.bar_label(bars, fmt="%.3g", fontsize=8, label_type="center")  # the top belongs to the error bar
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels(names, rotation=20, ha="right")


def plot_curves(ax, logs, names, metric):
    for log, name in zip(logs, names):
#A step logged twice(a run resumed from an earlier checkpoint) is drawn with its last value.
        by_step = {r["step"]: r[metric] for r in log["records"] if isinstance(r.get(metric), (int, float))}
        steps = sorted(by_step)
        ax.plot(steps, [by_step[s] for s in steps], marker="o" if len(steps) <= 30 else None, markersize=3,
                label=name)
    ax.set_xlabel("step")
    if len(logs) > 1:
        ax.legend()


def main():
    parser = argparse.ArgumentParser(description="Draw bench result files as a bar chart PNG, or training logs as "
                                                 "curves.")
    parser.add_argument("results", nargs="+", help="bench result JSON files, or gpt2_train JSON logs")
    parser.add_argument("--metric", required=True,
                        help="a row column (one bar per stage) or a top-level metric; for logs, a record field")
    parser.add_argument("--out", default="bench.png", help="the PNG to write (default: bench.png)")
    args = parser.parse_args()

    results = [load(p) for p in args.results]
    names = [os.path.splitext(os.path.basename(p))[0] for p in args.results]
    logs = [r for r in results if "log" in r]
    if logs and len(logs) != len(results):
        sys.exit("plot_bench.py: error: give either bench results or training logs, not both")
    if logs:
        fields = sorted({k for log in logs for r in log["records"] for k, v in r.items()
                         if k != "step" and isinstance(v, (int, float))})
        if args.metric not in fields:
            sys.exit(f"plot_bench.py: error: '{args.metric}' is not a field of the logs' records "
                     f"({', '.join(fields) or 'none'})")
        fig, ax = plt.subplots(figsize=(8, 4.8))
        plot_curves(ax, logs, names, args.metric)
        ax.set_ylabel(args.metric)
        machines = list(dict.fromkeys(machine_summary(log["machine"]) for log in logs))
        ax.set_title(f"gpt2_train: {args.metric} per step\n" + " | ".join(machines), fontsize=10)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.out, dpi=120)
        print(f"wrote {args.out}")
        return

    in_rows = any(args.metric in row for r in results for row in r["rows"])
    in_metrics = all(args.metric in r["metrics"] for r in results)
    if not in_rows and not in_metrics:
        columns = sorted({k for r in results for row in r["rows"] for k in list(row)[1:]})
        metrics = sorted({k for r in results for k in r["metrics"]})
        sys.exit(f"plot_bench.py: error: '{args.metric}' is neither a row column ({', '.join(columns) or 'none'}) "
                 f"nor a metric of every file ({', '.join(metrics) or 'none'})")

    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * sum(len(r["rows"]) for r in results) + 2), 4.8))
    if in_rows:
        plot_stages(ax, results, names, args.metric)
        if len(results) > 1:
            ax.legend()
    else:
        plot_metric(ax, results, names, args.metric)
    unit, better = unit_of(results, args.metric)
    ax.set_ylabel(f"{args.metric} ({unit})" if unit else args.metric)
    machines = list(dict.fromkeys(machine_summary(r["machine"]) for r in results))
    benches = " vs ".join(dict.fromkeys(r["bench"] for r in results))
    hint = f", {better} is better" if better else ""
    ax.set_title(f"{benches}: {args.metric}{hint}\n" + " | ".join(machines), fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
