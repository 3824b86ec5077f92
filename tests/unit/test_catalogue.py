"""The catalogue (``analysis.analyses``) over the families' ``catalogue.py`` files, the registry's
``Catalogue`` machinery, and the import paths the documentation shows."""

from __future__ import annotations

import importlib
import re

import pytest
from paths import REPO_ROOT

from analysis import analyses as catalogue
from analysis.api import TraceAnalysis
from analysis.errors import ConfigError
from analysis.registry import Analysis, Catalogue

# (name, facade method, placement) of every analysis registered before the metrics were regrouped
# into family packages (issue 27), in the order the catalogue had then: the report's order, the
# order of ``trace-analysis analyses`` and of the headline columns.
BEFORE_REGROUPING = [
    ("trace_metadata", "get_trace_metadata", "context"),
    ("profiler_step_table", "get_profiler_step_table", "context"),
    ("profiler_steps", "get_profiler_steps", "none"),
    ("trace_diff", "get_step_profile", "none"),
    ("step_start_gap", "get_step_start_gaps", "none"),
    ("trace_health", "check", "lead"),
    ("findings", "findings", "lead"),
    ("temporal_breakdown", "get_temporal_breakdown", "section"),
    ("idle_time_breakdown", "get_idle_time_breakdown", "section"),
    ("comm_comp_overlap", "get_comm_comp_overlap", "section"),
    ("kernel_launch_stats", "get_cuda_kernel_launch_stats", "section"),
    ("kernel_breakdown", "get_gpu_kernel_breakdown", "section"),
    ("operator_summary", "get_operator_summary", "section"),
    ("operator_roofline", "get_operator_roofline", "section"),
    ("queue_length", "get_queue_length_stream_summary", "section"),
    ("queue_length_summary", "get_queue_length_summary", "none"),
    ("queue_length_time_series", "get_queue_length_time_series", "none"),
    ("memory_bandwidth", "get_memcpy_summary", "section"),
    ("memory_bw_summary", "get_memory_bw_summary", "none"),
    ("memory_bw_time_series", "get_memory_bw_time_series", "none"),
    ("collectives", "get_collectives", "section"),
    ("collective_summary", "get_collective_summary", "none"),
    ("stragglers", "get_stragglers", "none"),
    ("step_breakdown", "get_step_breakdown", "section"),
    ("critical_path", "get_critical_path_summary", "section"),
    ("critical_path_graph", "critical_path_analysis", "none"),
]
HEADLINES_BEFORE = ["trace_metadata", "trace_health", "temporal_breakdown", "comm_comp_overlap",
                    "queue_length", "collectives", "critical_path"]


def test_the_regrouping_kept_every_analysis_its_method_and_its_place():
    # analyses added since may sit anywhere; these keep their names (as the name or an earlier
    # name, issue 27's one-name rule), methods (as the method or an alias) and relative order
    def now(name, method, placement):
        spec = catalogue.get(name)
        assert method in (spec.method, *spec.method_aliases), (name, method)
        return spec.name, placement == spec.placement

    pinned = [now(*entry) for entry in BEFORE_REGROUPING]
    assert all(same_place for _, same_place in pinned)
    names = [name for name, _ in pinned]
    assert [n for n in catalogue.analyses() if n in names] == names
    headlines = [catalogue.CATALOGUE.canonical(n) for n in HEADLINES_BEFORE]
    assert [n for n in catalogue.headline_names() if n in names] == headlines


def test_every_entry_is_declared_by_its_family_and_has_its_facade_method():
    families = {spec.name: family.__name__
                for family in catalogue.FAMILIES for spec in family.ENTRIES}
    assert list(families) and set(families) == set(catalogue.analyses())
    for family in catalogue.FAMILIES:
        package, _, module = family.__name__.rpartition(".")
        assert package.startswith("analysis.metrics.") and module == "catalogue"
        assert importlib.import_module(family.__name__.rpartition(".")[0]).__doc__
    for spec in catalogue.analyses().values():
        method = getattr(TraceAnalysis, spec.method)
        assert callable(method), spec.method
        assert f"``{(spec.rank_step or spec.derive).__module__}``" in method.__doc__
        for step in (spec.rank_step, spec.combine, spec.derive):
            if step is not None:  # the metric lives in the family that declares it
                family = families[spec.name].rpartition(".")[0]
                assert step.__module__.startswith(family + "."), (spec.name, step.__module__)


def test_a_catalogue_refuses_a_name_or_method_twice_and_names_the_choices():
    a = Analysis(name="a", method="get_a", doc="")
    with pytest.raises(ConfigError, match="'a' is registered twice"):
        Catalogue([a, Analysis(name="a", method="get_b", doc="")])
    with pytest.raises(ConfigError, match="'get_a' is registered twice"):
        Catalogue([a, Analysis(name="b", method="get_a", doc="")])
    with pytest.raises(ConfigError, match=r"unknown analysis 'c'; choose from \['a'\]"):
        Catalogue([a]).get("c")
    with pytest.raises(ConfigError, match="unknown analysis"):
        catalogue.get("no_such_analysis")


def documented_imports() -> list[str]:
    """Every ``from analysis... import ...`` / ``import analysis...`` the README, docs/ and the
    notebooks show."""
    texts = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md"),
             *(REPO_ROOT / "notebooks").glob("*.md")]
    name = r"\w+(?: as \w+)?"
    pattern = re.compile(rf"(?m)(from analysis(?:\.\w+)* import {name}(?:, *{name})*"
                         r"|^\s*import analysis(?:\.\w+)*(?: as \w+)?)")
    found = {m.group(1).strip() for path in texts if path.exists()
             for m in pattern.finditer(path.read_text(encoding="utf-8"))}
    return sorted(found)


def test_the_documentation_shows_the_paths_this_test_checks():
    shown = documented_imports()
    assert "from analysis.metrics.kernel_types import PRESETS" in shown
    assert "from analysis.metrics import temporal_breakdown" in shown


@pytest.mark.parametrize("statement", documented_imports())
def test_every_documented_import_path_works(statement):
    exec(statement, {})
