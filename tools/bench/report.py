#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turn a benchmark results file into a markdown table and a gnuplot chart.

Used by tools/bench/host-bench.sh (make bench) and tools/bench/bench.mk
(make bench-vm, on the host after the guest run). The results file has one
line per cell:

    path|workload|iops|MB/s|p50 us|p99 us|CPU us per I/O[|round]

with '-' where a value does not exist (wire rows have MB/s or latency only).
The benchmarks run every workload through all paths in turn, round after
round (A B C A B C ...), and tag each line with its round. A cell is
reported as the median of each column over its rounds, with the min and
max of IOPS; a row's ratio to its peer is the median of the per-round
ratios (round r of the row over round r of the peer), with their min and
max, so drift of the machine between rounds cancels out. Lines without a
round are paired in the order they appear.

    report.py --results FILE --paths "engine:rblk fio engine:nbdkit-unix ..."
              [--target "label|path|workload|peer-path|peer-workload|metric|goal"]...
              [--header FILE] [--md OUT.md] [--chart OUT.png] [--raw]
              [--begin MARK --end MARK --doc docs/BENCHMARKS.md
               [--rounds-doc docs/bench-log/rounds.md]]

--paths lists path:label:peer in table order (peer may be empty; "~"
in a label stands for a space). Each
row's ratio is its IOPS over its peer's in the same workload (MB/s when a
side has no IOPS). --target adds a line to the summary of the issue's
targets (metric: iops or mbs, higher is better and the goal is a lower
bound; cpu, CPU us per I/O, lower is better and the goal is an upper
bound on the ratio). --raw appends every round's figures (a collapsed
details block). With --doc, the text between the two marker
lines in that file is replaced by the header, summary, table and chart link
(the markers are added at the end if missing). With --rounds-doc, the
every-round block goes between the same markers in that file instead of
the doc, which names it: the doc stays the current results, short enough
to read (tests/e2e/03-docs.sh bounds its length).
"""
import argparse
import math
import os
import subprocess
import sys


COLS = ("iops", "mbs", "p50", "p99", "cpu")


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
    ap.add_argument("--raw", action="store_true")
    ap.add_argument("--doc")
    ap.add_argument("--begin")
    ap.add_argument("--end")
    ap.add_argument("--rounds-doc")
    a = ap.parse_args()

    paths = []  # (path, label, peer)
    for spec in a.paths.split():
        p, label, peer = (spec.split(":") + ["", ""])[:3]
        paths.append((p, label.replace("~", " ") or p, peer))
    labels = {p: l for p, l, _ in paths}

    res = {}  # (path, workload) -> dict of medians (+ min/max, rounds)
    runs = {}  # (path, workload) -> {round: fields}
    workloads = []
    with open(a.results) as f:
        for line in f:
            parts = line.rstrip("\n").split("|")
            if len(parts) < 6:
                continue
            parts += ["-"] * (8 - len(parts))
            p, w = parts[0], parts[1]
            if w not in workloads:
                workloads.append(w)
            cell = runs.setdefault((p, w), {})
            rnd = parts[7] if parts[7] != "-" else str(len(cell) + 1)
            cell[rnd] = dict(zip(COLS, (num(v) for v in parts[2:7])))
    for k, rounds in runs.items():
        rows = list(rounds.values())
        x = {c: median([r[c] for r in rows]) for c in COLS}
        vals = [r["iops"] for r in rows if r["iops"] is not None]
        x.update(n=len(rows), rounds=rounds,
                 iops_min=min(vals) if vals else None,
                 iops_max=max(vals) if vals else None)
        res[k] = x

    def ratio(x, y, metric=None):
        """Median, min and max of the per-round ratios x/y, or None."""
        if not x or not y:
            return None
        for m in ([metric] if metric else ["iops", "mbs"]):
            rs = [x["rounds"][r][m] / y["rounds"][r][m]
                  for r in x["rounds"] if r in y["rounds"]
                  and x["rounds"][r][m] and y["rounds"][r][m]]
            if rs:
                return median(rs), min(rs), max(rs)
        return None

    def fmt_ratio(r):
        if r is None:
            return "-"
        if r[1] == r[2]:
            return f"{r[0]:.2f}x"
        return f"{r[0]:.2f}x ({r[1]:.2f}-{r[2]:.2f})"

    out = []
    if a.header:
        with open(a.header) as f:
            out.append(f.read().rstrip("\n"))
        out.append("")

    if a.target:
        out.append("| target | measured | goal | |")
        out.append("|---|---:|---:|---|")
        ran = {k[0] for k in res}
        for t in a.target:
            label, p, w, q, qw, metric, goal = t.split("|")
            if p not in ran:  # a path this run left out: no row
                continue
            r = ratio(res.get((p, w)), res.get((q, qw)), metric)
            g = float(goal)
            lower = metric == "cpu"  # CPU per I/O: lower is better
            if r is None:
                verdict = "-"
            else:
                verdict = "met" if (r[0] <= g if lower else r[0] >= g) \
                    else "missed"
            out.append(f"| {label} | {fmt_ratio(r)} | "
                       f"{'≤' if lower else '≥'} {g:.2f}x | {verdict} |")
        out.append("")

    out.append("| workload | path | IOPS (min-max) | MB/s | p50 clat (us) | "
               "p99 clat (us) | CPU us/IO | ratio (min-max) | CPU ratio "
               "| to | rounds |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for w in workloads:
        for p, label, peer in paths:
            x = res.get((p, w))
            if not x:
                continue
            y = res.get((peer, w)) if peer else None
            r = ratio(x, y)
            c = ratio(x, y, "cpu")
            to = labels.get(peer, peer) if r is not None else ""
            spread = "" if x["iops_min"] is None or x["n"] < 2 else \
                f" ({fmt(x['iops_min'], 0)}-{fmt(x['iops_max'], 0)})"
            out.append(f"| {w} | {label} | {fmt(x['iops'], 0)}{spread} | "
                       f"{fmt(x['mbs'])} | {fmt(x['p50'])} | "
                       f"{fmt(x['p99'])} | {fmt(x['cpu'])} | "
                       f"{fmt_ratio(r)} | {fmt_ratio(c) if c else '-'} | "
                       f"{to} | {x['n']} |")
    raw = []
    if a.raw:
        raw.append("")
        raw.append("<details><summary>Every round (path, workload, round: "
                   "IOPS, MB/s, p50, p99, CPU us/IO)</summary>")
        raw.append("")
        raw.append("```")
        for w in workloads:
            for p, _, _ in paths:
                x = res.get((p, w))
                for rnd, v in (x["rounds"].items() if x else []):
                    raw.append(f"{p}|{w}|{rnd}|" + "|".join(
                        fmt(v[col], 0 if col == "iops" else 1)
                        for col in COLS))
        raw.append("```")
        raw.append("</details>")
    chart_line = []
    if a.chart:
        link = a.chart_link or os.path.basename(a.chart)
        chart_line = ["", f"![{a.chart_title or 'chart'}]({link})"]
    text = "\n".join(out + raw + chart_line) + "\n"

    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)

    if a.doc:
        doc_text = text
        if a.rounds_doc and raw:
            rel = os.path.relpath(a.rounds_doc, os.path.dirname(a.doc) or ".")
            doc_text = "\n".join(out + ["", f"Every round: {rel}."]
                                  + chart_line) + "\n"
            head = [a.header and open(a.header).read().split("\n")[0] or ""]
            replace_block(a.rounds_doc, a.begin, a.end,
                          "\n".join(head + raw) + "\n",
                          "# Every round of the generated benchmark tables\n")
        replace_block(a.doc, a.begin, a.end, doc_text, "# Benchmarks\n")

    if a.chart:
        chart(a, paths, workloads, res)


def replace_block(path, begin, end, text, empty):
    """Put text between the begin and end marker lines of path (added at
    the end, and the file made from empty, when missing)."""
    try:
        with open(path) as f:
            doc = f.read()
    except FileNotFoundError:
        doc = empty
    block = f"{begin}\n{text}{end}"
    i, j = doc.find(begin), doc.find(end)
    if i >= 0 and j > i:
        doc = doc[:i] + block + doc[j + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    with open(path, "w") as f:
        f.write(doc)


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
