#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turn a benchmark results file into a markdown table and a gnuplot chart.

Used by tools/bench/host-bench.sh (make bench) and tools/bench/bench.mk
(make bench-vm, on the host after the guest run). The results file has one
line per cell:

    path|workload|iops|MB/s|p50 us|p99 us|CPU us per I/O

with '-' where a value does not exist (wire rows have MB/s or latency only).
A cell that appears more than once (repeated runs) is reported as the
median of each column.

    report.py --results FILE --paths "engine:rblk fio engine:nbdkit-unix ..."
              [--target "label|path|workload|peer-path|peer-workload|metric|goal"]...
              [--header FILE] [--md OUT.md] [--chart OUT.png]
              [--begin MARK --end MARK --doc docs/BENCHMARKS.md]

--paths lists path:label:peer in table order (peer may be empty; "~"
in a label stands for a space). Each
row's ratio is its IOPS over its peer's in the same workload (MB/s when a
side has no IOPS). --target adds a line to the summary of the issue's
targets (metric: iops or mbs). With --doc, the text between the two marker
lines in that file is replaced by the header, summary, table and chart link
(the markers are added at the end if missing).
"""
import argparse
import math
import os
import subprocess
import sys


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def median(vals):
    vals = sorted(v for v in vals if v is not None)
    if not vals:
        return None
    m = len(vals) // 2
    return vals[m] if len(vals) % 2 else (vals[m - 1] + vals[m]) / 2


def fmt(v, nd=1):
    if v is None:
        return "-"
    if nd == 0 or v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{nd}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--paths", required=True)
    ap.add_argument("--target", action="append", default=[])
    ap.add_argument("--header")
    ap.add_argument("--md")
    ap.add_argument("--chart")
    ap.add_argument("--chart-title", default="")
    ap.add_argument("--chart-link")
    ap.add_argument("--doc")
    ap.add_argument("--begin")
    ap.add_argument("--end")
    a = ap.parse_args()

    paths = []  # (path, label, peer)
    for spec in a.paths.split():
        p, label, peer = (spec.split(":") + ["", ""])[:3]
        paths.append((p, label.replace("~", " ") or p, peer))
    labels = {p: l for p, l, _ in paths}

    res = {}  # (path, workload) -> dict
    runs = {}  # (path, workload) -> [fields of each run]
    workloads = []
    with open(a.results) as f:
        for line in f:
            parts = line.rstrip("\n").split("|")
            if len(parts) < 6:
                continue
            parts += ["-"] * (7 - len(parts))
            p, w = parts[0], parts[1]
            if w not in workloads:
                workloads.append(w)
            runs.setdefault((p, w), []).append(parts[2:7])
    # repeated cells (host-bench --repeat): the median of each column
    for k, rows in runs.items():
        col = [median([num(r[i]) for r in rows]) for i in range(5)]
        res[k] = dict(iops=col[0], mbs=col[1], p50=col[2], p99=col[3],
                      cpu=col[4], n=len(rows))

    def ratio(x, y, metric=None):
        if not x or not y:
            return None
        for m in ([metric] if metric else ["iops", "mbs"]):
            if x.get(m) and y.get(m):
                return x[m] / y[m]
        return None

    out = []
    if a.header:
        with open(a.header) as f:
            out.append(f.read().rstrip("\n"))
        out.append("")

    if a.target:
        out.append("| target | measured | goal | |")
        out.append("|---|---:|---:|---|")
        for t in a.target:
            label, p, w, q, qw, metric, goal = t.split("|")
            r = ratio(res.get((p, w)), res.get((q, qw)), metric)
            g = float(goal)
            verdict = "-" if r is None else ("met" if r >= g else "missed")
            out.append(f"| {label} | {fmt(r, 2)}{'x' if r else ''} | "
                       f"≥ {g:.1f}x | {verdict} |")
        out.append("")

    out.append("| workload | path | IOPS | MB/s | p50 clat (us) | "
               "p99 clat (us) | CPU us/IO | ratio | to |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for w in workloads:
        for p, label, peer in paths:
            x = res.get((p, w))
            if not x:
                continue
            r = ratio(x, res.get((peer, w))) if peer else None
            to = labels.get(peer, peer) if r is not None else ""
            out.append(f"| {w} | {label} | {fmt(x['iops'], 0)} | "
                       f"{fmt(x['mbs'])} | {fmt(x['p50'])} | "
                       f"{fmt(x['p99'])} | {fmt(x['cpu'])} | "
                       f"{fmt(r, 2)}{'x' if r is not None else ''} | {to} |")
    if a.chart:
        link = a.chart_link or os.path.basename(a.chart)
        out.append("")
        out.append(f"![{a.chart_title or 'chart'}]({link})")
    text = "\n".join(out) + "\n"

    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)

    if a.doc:
        try:
            with open(a.doc) as f:
                doc = f.read()
        except FileNotFoundError:
            doc = "# Benchmarks\n"
        block = f"{a.begin}\n{text}{a.end}"
        i, j = doc.find(a.begin), doc.find(a.end)
        if i >= 0 and j > i:
            doc = doc[:i] + block + doc[j + len(a.end):]
        else:
            doc = doc.rstrip("\n") + "\n\n" + block + "\n"
        with open(a.doc, "w") as f:
            f.write(doc)

    if a.chart:
        chart(a, paths, workloads, res)


def chart(a, paths, workloads, res):
    """Clustered bars: IOPS per workload and path (log scale)."""
    cols = [(p, l) for p, l, _ in paths
            if any(res.get((p, w), {}).get("iops") for w in workloads)]
    rows = [w for w in workloads
            if any(res.get((p, w), {}).get("iops") for p, _ in cols)]
    if not cols or not rows:
        return
    lo = min(res[(p, w)]["iops"] for p, _ in cols for w in rows
             if res.get((p, w), {}).get("iops"))
    ymin = 10 ** math.floor(math.log10(max(lo, 1)))
    dat = a.chart + ".dat"
    with open(dat, "w") as f:
        f.write("workload " + " ".join(f'"{l}"' for _, l in cols) + "\n")
        for w in rows:
            vals = []
            for p, _ in cols:
                v = res.get((p, w), {}).get("iops")
                vals.append(f"{v:.0f}" if v else "NaN")
            f.write(f'"{w}" ' + " ".join(vals) + "\n")
    gp = f"""set terminal pngcairo size 1400,700 noenhanced font ",10"
set output "{a.chart}"
set title "{a.chart_title}"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set logscale y
set ylabel "IOPS (log scale)"
set grid ytics
set key outside right top vertical
set xtics rotate by -20 scale 0
set yrange [{ymin}:*]
plot for [i=2:{len(cols) + 1}] "{dat}" using i:xtic(1) title columnheader(i)
"""
    try:
        subprocess.run(["gnuplot"], input=gp, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"report: gnuplot failed: {e}", file=sys.stderr)
    finally:
        os.unlink(dat)


if __name__ == "__main__":
    main()
