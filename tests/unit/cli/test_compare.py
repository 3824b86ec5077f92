"""``trace-analysis compare BASE TEST``: terminal tables and the report folder."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from analysis import TraceAnalysis, compare
from analysis.cli import main
from analysis.testing.trace_pairs import changed_pair


@pytest.fixture(scope="module")
def pair_dirs(tmp_path_factory):
    return changed_pair().write(tmp_path_factory.mktemp("pair"))


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_terminal_tables_with_top(pair_dirs):
    base, test = pair_dirs
    result = run("compare", str(base), str(test), "--no-cache", "-q", "--top", "2")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Step time by category" in out and "exposed_communication" in out
    ops = out.split("Operators, top 2 changes")[1].split("Kernels")[0]
    assert "aten::addmm" in ops and "aten::gelu" in ops and "aten::mul" not in ops  # top 2 only


def test_report_folder_has_page_and_tables_equal_to_the_api(pair_dirs, tmp_path):
    base, test = pair_dirs
    result = run("compare", str(base), str(test), "--no-cache", "-q", "-o", str(tmp_path),
                 "-f", "html", "--min-change-pct", "1")
    assert result.exit_code == 0, result.output
    page = (tmp_path / "index.html").read_text()
    assert "Run comparison: base vs test" in page and "+124.0 µs (+57.4 %)" in page
    comparison = compare(TraceAnalysis(base, use_cache=False, progress=False),
                         TraceAnalysis(test, use_cache=False, progress=False), min_change_pct=1)
    for name in ("breakdown", "operators", "kernels", "steps"):
        written = pd.read_csv(tmp_path / "tables" / f"{name}.csv")
        expected = getattr(comparison, name)()
        assert list(written.columns) == list(expected.columns)
        assert len(written) == len(expected)
    ops = pd.read_csv(tmp_path / "tables" / "operators.csv").set_index("operator")
    assert ops.at["aten::addmm", "diff_time_us"] == 100


def test_svg_figures(pair_dirs, tmp_path, kaleido_session):
    base, test = pair_dirs
    result = run("compare", str(base), str(test), "--no-cache", "-q", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    svgs = sorted(p.name for p in (tmp_path / "figures").iterdir())
    assert svgs == ["kernels_gained_lost.svg", "operators_gained_lost.svg",
                    "step_time_waterfall.svg"]


def test_bad_ranks_is_a_usage_error(pair_dirs):
    base, test = pair_dirs
    result = CliRunner().invoke(main, ["compare", str(base), str(test), "--ranks", "a,b"])
    assert result.exit_code == 2 and "--ranks" in result.output


def test_missing_rank_is_one_line_error(pair_dirs):
    base, test = pair_dirs
    result = CliRunner().invoke(main, ["compare", str(base), str(test), "--ranks", "3",
                                       "--no-cache", "-q"])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("error: ranks [3] are not loaded in both runs")


def test_terminal_rows_stay_distinct_counts_are_integers_and_added_reads_new(pair_dirs):
    base, test = pair_dirs
    result = CliRunner().invoke(main, ["compare", str(base), str(test), "--no-cache", "-q"],
                                env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "inf" not in result.output and ".00 " not in result.output
    kernels = result.output.split("Kernels, top")[1].splitlines()[1:]
    block = kernels[:kernels.index("")] if "" in kernels else kernels
    start = block[0].index("name")  # the name column, read by its position under the header
    end = start + len("name") + len(block[0][start + 4:]) - len(block[0][start + 4:].lstrip())
    names = [line[start:end].strip() for line in block[1:]]
    assert len(names) == 7 and len(set(names)) == 7
    comparison = compare(TraceAnalysis(str(base)), TraceAnalysis(str(test)))
    changes = comparison.kernels()["change"].value_counts()
    assert changes["added"] >= 1 and changes["removed"] >= 1
    assert sum(line.endswith(" new") for line in block) == changes["added"]
    assert sum(line.endswith(" gone") for line in block) == changes["removed"]


def test_shortened_names_stay_distinct():
    from analysis.cli.terminal import distinct_shortened

    stem = "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_"
    names = [stem + "warp_per_row_1<c10::Half, float>(int)",
             stem + "cta_per_row_1<c10::Half, float>(int)",
             stem + "cta_per_row_1<float, float>(int)", "short"]
    out = distinct_shortened(names, 40)
    assert len(set(out)) == 4 and all(len(s) <= 40 for s in out) and out[3] == "short"
    # HTA's TraceDiff cut names to one prefix: all three read alike there
    assert len({n[:68] for n in names[:3]}) == 1


def test_counts_print_as_integers_and_percentages_say_new_and_gone():
    from analysis.cli.compare import _percent
    from analysis.cli.terminal import column_cells

    assert column_cells(pd.Series([872.0, 3.0])) == ["872", "3"]
    df = pd.DataFrame({"base_time_us": [0.0, 5.0, 4.0, 0.0], "test_time_us": [3.0, 0.0, 6.0, 0.0],
                       "diff_pct": [float("inf"), -100.0, 50.0, float("nan")]})
    assert _percent(df) == ["new", "gone", "+50.0", "–"]
