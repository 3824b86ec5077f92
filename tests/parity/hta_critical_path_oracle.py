"""Runs HolisticTraceAnalysis 0.5.0's critical path on one trace and prints it as JSON.

Runs in the separate pandas<3 environment built by ``scripts/make-hta-oracle-venv.sh`` (HTA 0.5.0's
critical path raises under pandas 3), never inside the project's own environment:

    $(scripts/make-hta-oracle-venv.sh) tests/parity/hta_critical_path_oracle.py TRACE ANNOTATION INSTANCE

Events are named by ``[name, ts, dur, pid, tid]`` (µs, as HTA holds them) so that the caller can
match them with its own events whatever the two tools' row numbering.
"""

import io
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings


def main() -> None:
    trace, annotation, instance = sys.argv[1], sys.argv[2], int(sys.argv[3])
    zero_weight_launch = len(sys.argv) > 4 and sys.argv[4] == "zero-weight-launch-edges"
    if zero_weight_launch:
        os.environ["CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE"] = "1"
    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    from hta.trace_analysis import TraceAnalysis

    tmp = tempfile.mkdtemp(prefix="hta-cp-")
    shutil.copy(trace, tmp)
    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_dir=tmp)
    t1 = time.perf_counter()
    real_stdout, sys.stdout = sys.stdout, io.StringIO()  # HTA prints
    try:
        rank = sorted(ta.t.traces)[0]  # the trace's own rank (one file)
        try:
            graph, success = ta.critical_path_analysis(
                rank=rank, annotation=annotation, instance_id=instance
            )
        # HTA's own failures: cycles, missing nodes, and a window without any launch call
        # (its queue-length join of None: TypeError at critical_path_analysis.py:915)
        except (ValueError, AssertionError, TypeError) as e:
            json.dump({"success": False, "error": f"{type(e).__name__}: {e}"}, real_stdout)
            return
        t2 = time.perf_counter()
        if not success:  # e.g. a cycle: networkx gives up, HTA returns (graph, False)
            json.dump({"success": False, "nodes": len(graph.node_list)}, real_stdout)
            return
        bd = graph.get_critical_path_breakdown()
        summary = graph.summary()
    finally:
        sys.stdout = real_stdout
    base = int(ta.t.min_ts)
    df = ta.t.get_trace(rank)
    sym = ta.t.symbol_table.get_sym_table()

    def key(ev_idx):
        if ev_idx is None or ev_idx < 0:
            return None
        r = df.loc[ev_idx]
        return [sym[int(r["name"])], int(r["ts"]) + base, int(r["dur"]), int(r["pid"]), int(r["tid"])]

    edges = []
    for u, v in graph.edges:
        e = graph.edges[u, v]["object"]
        nu, nv = graph.node_list[u], graph.node_list[v]
        edges.append({
            "src": key(nu.ev_idx), "src_start": bool(nu.is_start),
            "dst": key(nv.ev_idx), "dst_start": bool(nv.is_start),
            "weight": int(e.weight), "type": e.type.value,
            "event": key(graph.edge_to_event_map.get((u, v))),
            "critical": e in graph.critical_path_edges_set,
        })
    out = {
        "success": bool(success),
        "nodes": len(graph.node_list),
        "path_nodes": len(graph.critical_path_nodes),
        "path_events": sorted(
            (key(i) for i in graph.critical_path_events_set), key=lambda k: (k[1], k[0], k[3])
        ),
        "path_edges": len(graph.critical_path_edges_set),
        "edges": edges,
        "summary": {k: float(v) for k, v in summary.items()},
        "breakdown_total": float(bd["duration"].sum()),
        "load_s": t1 - t0,
        "critical_path_s": t2 - t1,
    }
    shutil.rmtree(tmp, ignore_errors=True)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
