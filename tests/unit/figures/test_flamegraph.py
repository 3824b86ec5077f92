"""Flame graphs of py-spy profiles: the figure's structure, readability rules, and a real SVG render."""

from __future__ import annotations

import shutil
import subprocess

import plotly.graph_objects as go
from paths import TEST_DATA

from analysis.figures.flamegraph import flamegraph
from analysis.pyspy.samples import call_tree, parse_pyspy

DATA = TEST_DATA / "pyspy"
NODES = [DATA / "profile_node0.txt", DATA / "profile_node1.txt"]


def icicle(fig: go.Figure) -> go.Icicle:
    (trace,) = fig.data
    assert isinstance(trace, go.Icicle)
    return trace


def test_one_root_per_file_under_all_files():
    trace = icicle(flamegraph(call_tree(NODES)))
    ids, parents, labels = list(trace.ids), list(trace.parents), list(trace.labels)
    top = ids[parents.index("")]
    assert labels[ids.index(top)] == "all files"
    file_roots = [labels[i] for i, p in enumerate(parents) if p == top]
    assert sorted(file_roots) == ["profile_node0.txt", "profile_node1.txt"]
    assert set(parents) - {""} <= set(ids)  # every parent is drawn
    assert trace.branchvalues == "total"
    assert trace.tiling.flip == "y"  # outermost frame at the bottom, as in a flame graph


def test_values_are_inclusive_samples():
    tree = call_tree(NODES)
    trace = icicle(flamegraph(tree, min_width=0))
    values = dict(zip(trace.ids, trace.values, strict=True))
    for node, samples in zip(tree["node"], tree["samples"], strict=True):
        assert values[str(node)] == samples
    assert len(trace.ids) == len(tree) + 1


def test_narrow_frames_are_left_out_and_long_names_cut():
    long_name = "Trainer._run_one_optimizer_step_with_gradient_accumulation_and_clipping"
    text = (
        f"main (train.py:1);{long_name} (trainer.py:10) 990\n"
        "main (train.py:1);rare (util.py:3) 10\n"
    )
    profile = parse_pyspy(text, source="node.txt")
    trace = icicle(flamegraph(call_tree(profile), min_width=0.02, label_chars=30))
    labels = list(trace.labels)
    assert "rare" not in labels  # 1 % < 2 %
    cut = [label for label in labels if label.startswith("Trainer.")]
    assert cut == [long_name[:29] + "…"]
    hover = [row[0] for row in trace.customdata]
    assert long_name in hover  # the full name stays on hover
    assert any(row[1] == "trainer.py:10" for row in trace.customdata)
    assert "rare" in list(icicle(flamegraph(call_tree(profile), min_width=0)).labels)


def test_height_grows_with_stack_depth():
    shallow = parse_pyspy("a (x.py:1) 1\n")
    deep = parse_pyspy(";".join(f"f{i} (x.py:{i})" for i in range(80)) + " 1\n")
    assert flamegraph(call_tree(deep)).layout.height > flamegraph(call_tree(shallow)).layout.height + 70 * 20


def test_empty_tree_gives_a_no_data_figure():
    tree = call_tree(NODES).iloc[0:0]
    fig = flamegraph(tree)
    assert len(fig.data) == 0 and "No py-spy samples" in fig.layout.annotations[0].text


def test_svg_renders(kaleido_session, tmp_path):
    """Render through kaleido and rsvg-convert, as a user's `flamegraph -o x.svg` does (on the
    session's browser: tests/conftest.py, ``kaleido_session``)."""
    from analysis.figures.export import export_figures

    fig = flamegraph(call_tree(NODES))
    written = export_figures({"flame": fig}, tmp_path, ["svg"])
    svg = written["flame"][0]
    text = svg.read_text()
    assert text.startswith("<svg") and "dense_kernel" in text and "run_callback" in text
    assert 'class="iciclelayer"' in text
    if shutil.which("rsvg-convert"):
        png = tmp_path / "flame.png"
        subprocess.run(["rsvg-convert", str(svg), "-o", str(png)], check=True)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
