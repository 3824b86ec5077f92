"""The benchmark's records (``results.json``) → ``RESULTS.md``: targets, start-up, one table per dataset.

Every number comes from the records: medians over the runs of each kind, the machine and code
versions from the ``machine`` each record carries, ratios taken between kinds of the same run.
"""

from __future__ import annotations

import datetime as dt
import statistics

import datasets

ANALYSES = ("temporal", "idle", "overlap", "launch", "kernels")
STARTUP = "startup"  # the dataset name of start-up records
# The previous round's numbers (RESULTS.md of 2026-11-21, commit dfab90b, medians of 3 runs on the
# machine recorded there): what "faster than today" in issue #19's targets is measured against.
BASELINE = {
    "cached five analyses, real-8 (s)": 0.829,
    "first-open load, synth-r1-e1m, one parsing process (s)": 4.04,
}


def median(records: list[dict], kind: str, key: str) -> float | None:
    values = [
        (r["timings"][key] if key in r.get("timings", {}) else r.get(key))
        for r in records
        if r["kind"] == kind
    ]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v: float | None, unit: str = "s") -> str:
    if v is None:
        return "–"
    return f"{v:.0f}" if unit == "MiB" else (f"{v:.3f}" if v < 1 else f"{v:.2f}")


def ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None or b == 0 else f"{a / b:.1f}×"


def dataset_table(ds: datasets.Dataset, records: list[dict]) -> list[str]:
    st = datasets.stats(ds.path) if ds.path.is_dir() else None
    runs = max((r["round"] for r in records), default=-1) + 1
    size = (f"{st['files']} files, {st['json_mb']:.0f} MB of JSON ({st['disk_mb']:.0f} MB gzip); "
            if st else "")
    lines = [
        f"### {ds.name}: {ds.description}",
        "",
        f"{size}median of {runs} runs per column.",
        "",
        "| phase | HTA 0.5.0 | ours (first open) | HTA / ours | ours (second open, cache) | HTA / cached |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows = [("load", "load"), *[(a, a) for a in ANALYSES], ("five analyses", "analyses"),
            ("**end-to-end** (in-process)", "e2e"), ("import (not in end-to-end)", "import"),
            ("**whole process** (start to exit)", "process"), ("CPU time, whole process tree", "cpu")]
    for label, key in rows:
        h, o, c = (median(records, k, key) for k in ("hta", "ours", "cached"))
        lines.append(f"| {label} (s) | {fmt(h)} | {fmt(o)} | {ratio(h, o)} | {fmt(c)} | {ratio(h, c)} |")
    for label, key in (("peak memory, sum of RSS", "peak_rss_mib"), ("peak memory, sum of PSS", "peak_pss_mib")):
        h, o, c = (median(records, k, key) for k in ("hta", "ours", "cached"))
        lines.append(f"| {label} (MiB) | {fmt(h, 'MiB')} | {fmt(o, 'MiB')} | {ratio(h, o)} "
                     f"| {fmt(c, 'MiB')} | {ratio(h, c)} |")
    serial = median(records, "serial", "load")
    if serial is not None:
        ours = median(records, "ours", "load")
        lines += ["", f"One parsing process (`max_workers=1`): load {fmt(serial)} s, whole process "
                  f"{fmt(median(records, 'serial', 'process'))} s, peak RSS "
                  f"{fmt(median(records, 'serial', 'peak_rss_mib'), 'MiB')} MiB; the default loads "
                  f"{ratio(serial, ours)} as fast (it decodes one file's chunks on several cores from "
                  f"4 CPUs, or when `max_workers` is given; see the machine's usable cores above)."]
    floor = median(records, "floor", "load")
    ours_e2e, ours_load = median(records, "ours", "e2e"), median(records, "ours", "load")
    if floor is not None:
        lines += ["", f"Floor (read + decompress + msgspec decode only, same pool): {fmt(floor)} s; "
                  f"ours end-to-end / floor = {ratio(ours_e2e, floor)}, ours load / floor = "
                  f"{ratio(ours_load, floor)}; in CPU seconds of the whole process tree, ours / floor = "
                  f"{ratio(median(records, 'ours', 'cpu'), median(records, 'floor', 'cpu'))}; "
                  f"floor peak RSS {fmt(median(records, 'floor', 'peak_rss_mib'), 'MiB')} MiB."]
    checks = {r["kind"]: r["check"] for r in records if r["kind"] in ("hta", "ours", "cached")}
    if "hta" in checks and "ours" in checks:
        agree = _agree(checks["hta"], checks["ours"]) and _agree(checks["hta"], checks.get("cached", checks["ours"]))
        lines += ["", "Results agree with HTA (kernel and idle time per rank, launch and idle-row counts): "
                  + ("yes" if agree else f"**NO** (HTA {checks['hta']} vs ours {checks['ours']})")]
    failed = {f"{r['kind']}: {name}": why for r in records for name, why in r.get("failed", {}).items()}
    if failed:
        lines += ["", "**Failed analyses (left out of the sums above):**", ""]
        lines += [f"- {k}: `{v}`" for k, v in sorted(failed.items())]
    loads = [r["load_avg"] for r in records]
    cores = records[-1].get("machine", {}).get("usable_cores", "?")
    lines += ["", f"1-minute load average during the runs: {min(loads):.1f}–{max(loads):.1f} ({cores} cores).", ""]
    return lines


def _agree(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    if any(a[k] != b[k] for k in ("ranks", "launches", "idle_rows") if k in a):
        return False
    pairs = zip(a.get("kernel_time_us", []) + a.get("idle_time_us", []),
                b.get("kernel_time_us", []) + b.get("idle_time_us", []), strict=True)
    return all(abs(x - y) <= 1e-6 * max(1.0, abs(x)) for x, y in pairs)


def targets(records: list[dict]) -> list[str]:
    """Issue #19's targets: real-8 unless stated, ratios between kinds of the same run."""
    real = [r for r in records if r["dataset"] == datasets.REAL.name]
    lines = ["| target | measured | met |", "|---|---:|:---:|"]

    def row(label, a, b, goal, higher=True, unit="×"):
        if a is None or b is None or b == 0:
            return
        value = a / b
        ok = value >= goal if higher else value <= goal
        lines.append(f"| {label} | {value:.2f}{unit} | {'yes' if ok else '**no**'} |")

    def med(kind, key, rs=real):
        return median(rs, kind, key)

    row("first open, whole process: ≥ 8× faster than HTA", med("hta", "process"), med("ours", "process"), 8)
    row("first open, in-process (load + five analyses): ≥ 9× faster than HTA", med("hta", "e2e"),
        med("ours", "e2e"), 9)
    row("second open (cache), whole process: ≥ 25× faster than HTA", med("hta", "process"),
        med("cached", "process"), 25)
    row("peak memory, sum of RSS over the process tree: ≤ 0.4× HTA's", med("ours", "peak_rss_mib"),
        med("hta", "peak_rss_mib"), 0.4, higher=False)
    h_cpu, o_cpu = med("hta", "cpu"), med("ours", "cpu")
    if h_cpu and o_cpu:
        lines.append(f"| (for reference) first open, CPU seconds of the process tree, HTA / ours | "
                     f"{h_cpu / o_cpu:.1f}× | |")
    row("five analyses on cached real-8: ≥ 2.5× faster than the previous round "
        f"({BASELINE['cached five analyses, real-8 (s)']} s)",
        BASELINE["cached five analyses, real-8 (s)"], med("cached", "analyses"), 2.5)
    one = [r for r in records if r["dataset"] == "synth-r1-e1m"]
    row("one file of 1 M events, first open: the default load ≥ 1.6× faster than one parsing "
        "process (same run)", median(one, "serial", "load"), median(one, "ours", "load"), 1.6)
    row("the same, against the previous round's single-worker load "
        f"({BASELINE['first-open load, synth-r1-e1m, one parsing process (s)']} s)",
        BASELINE["first-open load, synth-r1-e1m, one parsing process (s)"], median(one, "ours", "load"), 1.6)
    for small, big in (("synth-r1-e250k", "synth-r1-e1m"), ("synth-r1-e1m", "synth-r1-e4m")):
        a = [r for r in records if r["dataset"] == small]
        b = [r for r in records if r["dataset"] == big]
        if not a or not b:
            continue
        events = datasets.BY_NAME[big].events_per_rank / datasets.BY_NAME[small].events_per_rank
        for what, key in (("time (first open, whole process)", "process"), ("time (end-to-end)", "e2e"),
                          ("memory (sum of RSS)", "peak_rss_mib")):
            row(f"{events:.0f}× events ({small} → {big}): {what} ≤ 4.4×", median(b, "ours", key),
                median(a, "ours", key), 4.4, higher=False)
    startup = [r for r in records if r["dataset"] == STARTUP]
    if startup:
        help_ = startup[-1]["startup"].get("trace-analysis --help", {})
        if help_.get("package_imports_s") is not None:
            ok = help_["package_imports_s"] < 0.3
            lines.append(f"| `trace-analysis --help`: imports < 0.3 s (beyond the interpreter's own) | "
                         f"{help_['package_imports_s']:.3f} s | {'yes' if ok else '**no**'} |")
        facade = startup[-1]["startup"].get("from analysis import TraceAnalysis", {})
        if "heavy" in facade:
            lazy = [m for m in ("plotly", "kaleido", "dask", "jinja2", "pyarrow.compute") if m in facade["heavy"]]
            lines.append("| `from analysis import TraceAnalysis` imports none of plotly, kaleido, dask, "
                         f"jinja2, pyarrow.compute | {', '.join(lazy) or 'none of them'} | "
                         f"{'yes' if not lazy else '**no**'} |")
    return lines


def startup_table(records: list[dict]) -> list[str]:
    startup = [r for r in records if r["dataset"] == STARTUP]
    if not startup:
        return []
    rec = startup[-1]
    lines = ["## Start-up", "",
             f"Whole process (median of {rec.get('runs', '?')} runs) and import time "
             "(`python -X importtime`, top-level cumulative; \"package\" = beyond `python -c pass`).", "",
             "| command | whole process (s) | imports (s) | package imports (s) | heavy modules imported |",
             "|---|---:|---:|---:|---|"]
    for label, m in rec["startup"].items():
        lines.append(f"| `{label}` | {fmt(m['process_s'])} | {fmt(m['imports_s'])} | "
                     f"{fmt(m.get('package_imports_s'))} | {', '.join(m['heavy']) or '–'} |")
    return lines + [""]


def machine_lines(records: list[dict]) -> list[str]:
    machines = [r["machine"] for r in records if "machine" in r]
    if not machines:
        return ["- Machine: not recorded (records from before machines were recorded as data)"]
    lines = []
    seen = []
    for m in machines:
        key = (m["cpu"], m["usable_cores"], m["ram_gib"], m["commit"], m["dirty"])
        if key in seen:
            continue
        seen.append(key)
        packages = ", ".join(f"{p} {v}" for p, v in m["packages"].items() if v)
        lines.append(f"- Machine: {m['cpu']}, {m['usable_cores']} usable cores of {m['cores']}, "
                     f"{m['ram_gib']} GiB RAM, {m['platform']}; Python {m['python']}; {packages}; "
                     f"commit {m['commit']}{' plus working-tree changes' if m['dirty'] else ''}")
    if len(seen) > 1:
        lines.append("- **The records come from more than one machine or commit**: compare ratios within a "
                     "dataset only.")
    return lines


def report(records: list[dict], dsets: list[datasets.Dataset]) -> str:
    runs = [r for r in records if r["dataset"] != STARTUP]
    loads = [r["load_avg"] for r in runs] or [0.0]
    commands = dict.fromkeys(r.get("command", "") for r in records)
    when = max((r.get("time", 0) for r in records), default=0)
    lines = ["# Benchmark results", "",
             f"- Date: {dt.datetime.fromtimestamp(when).strftime('%Y-%m-%d %H:%M') if when else 'unknown'}",
             *machine_lines(records),
             "- Commands: " + ", ".join(f"`.venv/bin/python benchmarks/run.py{' ' + c if c else ''}`"
                                        for c in commands),
             f"- Machine load: 1-minute load average {min(loads):.1f}–{max(loads):.1f} during the runs "
             "(other jobs shared the machine: wall times are inflated, CPU seconds much less so)",
             "",
             "## Targets (dataset real-8 unless stated)", "", *targets(records), "",
             *startup_table(records),
             "## Per dataset", ""]
    for ds in dsets:
        rs = [r for r in runs if r["dataset"] == ds.name]
        if rs:
            lines += dataset_table(ds, rs)
    return "\n".join(lines) + "\n"
