#!/usr/bin/env python3
"""Turns the load client's JSON lines into a Markdown table (with each
peer's ratio to ours, measured in the same run) and an SVG bar chart.
A workload a server ran in several rounds is represented by its median
round (by requests/s), and the table says how many rounds there were.
Beside throughput, the table gives the CPU time the server's processes
used per request in that round, and its ratio to ours: the server's own
cost, where throughput on shared cores mixes in the client's.

    python3 bench/report.py results.jsonl table.md chart.svg
"""

import json
import sys
from html import escape

OURS = "ours-wasi"
ORDER = ["ours-wasi", "ours-wasi-normal", "ours-wasi-jwt", "ours-const", "ours-worker", "rmcp", "rmcp-tuned", "fastmcp"]


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def medians(rows):
    """One row per (server, workload): the median round by requests/s
    (the lower middle one of an even number), with `rounds` set."""
    groups = {}
    for r in rows:
        groups.setdefault((r["label"], key(r)), []).append(r)
    out = []
    for runs in groups.values():
        ok = sorted((r for r in runs if not r.get("failed")), key=lambda r: r["rps"])
        if not ok:
            out.append(dict(runs[0], rounds=len(runs)))
            continue
        out.append(dict(ok[(len(ok) - 1) // 2], rounds=len(runs), failed_rounds=len(runs) - len(ok)))
    return out


def key(r):
    stored = r.get("stored", 0)
    w = r["workload"]
    name = f"{w} c={r['concurrency']}"
    if w == "create" or (w == "get" and stored):
        name += f" ({stored:,} stored)"
    return name


def fmt_ms(us):
    return f"{us / 1000:.2f}"


def rounds(r):
    failed = r.get("failed_rounds", 0)
    return f"{r['rounds']}" + (f" ({failed} failed)" if failed else "")


def table(rows):
    by = {}
    workloads = []
    for r in rows:
        k = key(r)
        if k not in workloads:
            workloads.append(k)
        by[(r["label"], k)] = r
    servers = [s for s in ORDER if any(r["label"] == s for r in rows)]
    out = [
        "| workload | server | req/s | flows/s | p50 ms | p99 ms | errors | rounds | ours ÷ this | server CPU µs/req | this ÷ ours (CPU) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for k in workloads:
        ours = by.get((OURS, k))
        for s in servers:
            r = by.get((s, k))
            if not r:
                continue
            if r.get("failed"):
                out.append(f"| {k} | {s} | failed | | | | | {r['rounds']} | | | |")
                continue
            ratio = ""
            if ours and not ours.get("failed") and r["rps"] > 0 and s != OURS:
                ratio = f"{ours['rps'] / r['rps']:.1f}x"
            flows = f"{r['flows_per_s']:.0f}" if r["workload"] == "flow" else ""
            cpu = r.get("server_cpu_us_per_req")
            ours_cpu = ours.get("server_cpu_us_per_req") if ours else None
            cpu_ratio = f"{cpu / ours_cpu:.1f}x" if cpu and ours_cpu and s != OURS else ""
            cpu_text = f"{cpu:,.1f}" if cpu is not None else ""
            out.append(
                f"| {k} | {s} | {r['rps']:,.0f} | {flows} | {fmt_ms(r['p50_us'])} | {fmt_ms(r['p99_us'])} | {r['errors']} | {rounds(r)} | {ratio} | {cpu_text} | {cpu_ratio} |"
            )
    return "\n".join(out) + "\n"


def svg(rows, path):
    """Grouped horizontal bars: requests/s of tasks/get (1 and 16
    connections) per server, on a log scale."""
    import math

    wanted = [("get", 1), ("get", 16), ("discover", 16)]
    data = {}
    for r in rows:
        if r.get("failed") or r.get("stored"):
            continue
        w = (r["workload"], r["concurrency"])
        if w in wanted:
            data[(r["label"], w)] = r["rps"]
    servers = [s for s in ORDER if any(k[0] == s for k in data)]
    colors = {("get", 1): "#4e79a7", ("get", 16): "#f28e2b", ("discover", 16): "#76b7b2"}
    bar, gap, left, width = 14, 14, 110, 560
    top = 40
    height = top + len(servers) * (len(wanted) * bar + gap) + 50
    vmax = max(data.values(), default=1)
    lmax = math.log10(max(vmax, 10)) + 0.1

    def x(v):
        return left + width * max(math.log10(max(v, 1)), 0) / lmax

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 120}" height="{height}" font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="20" font-size="14" font-weight="bold">requests per second, loopback, median round of one run (log scale)</text>',
    ]
    y = top
    for s in servers:
        parts.append(f'<text x="{left - 8}" y="{y + bar * len(wanted) / 2 + 4}" text-anchor="end">{escape(s)}</text>')
        for w in wanted:
            v = data.get((s, w))
            if v is not None:
                parts.append(f'<rect x="{left}" y="{y}" width="{x(v) - left:.1f}" height="{bar - 2}" fill="{colors[w]}"/>')
                parts.append(f'<text x="{x(v) + 4:.1f}" y="{y + bar - 4}">{v:,.0f}</text>')
            y += bar
        y += gap
    lx = left
    for w in wanted:
        parts.append(f'<rect x="{lx}" y="{height - 30}" width="12" height="12" fill="{colors[w]}"/>')
        label = f"{'tasks/get' if w[0] == 'get' else 'server/discover'}, {w[1]} conn."
        parts.append(f'<text x="{lx + 16}" y="{height - 20}">{label}</text>')
        lx += 190
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    src, md, chart = sys.argv[1], sys.argv[2], sys.argv[3]
    rows = medians(load(src))
    text = table(rows)
    with open(md, "w") as f:
        f.write(text)
    svg(rows, chart)


if __name__ == "__main__":
    main()
