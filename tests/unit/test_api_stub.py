"""The typed API: every registry ``Param`` has a type and a description, the generated methods carry
them (signature and ``Args:``/``Returns:`` docstring), ``analysis/api.pyi`` and ``docs/api.md``
are what the registry generates (``scripts/make-api-stub.py``), the declared columns are the ones
the analyses return, and a type checker reads the stub."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import subprocess
import sys
import warnings

import pandas as pd
import pytest
from paths import REPO_ROOT
from roofline_traces import hand_made_rank

from analysis import analyses as catalogue
from analysis import api_reference
from analysis.api import TraceAnalysis
from analysis.errors import TraceAnalysisError

SPECS = list(catalogue.analyses().values())


def test_the_committed_stub_and_reference_page_are_what_the_registry_generates():
    # fails when an entry (params, returns, columns, doc) or a TraceAnalysis method changed and
    # scripts/make-api-stub.py was not run
    for path, text in ((api_reference.STUB_PATH, api_reference.stub_text()),
                       (api_reference.DOC_PATH, api_reference.markdown_text())):
        assert (REPO_ROOT / path).read_text(encoding="utf-8") == text, (
            f"{path} is out of date: run scripts/make-api-stub.py")


def test_the_script_finds_the_committed_files_up_to_date():
    out = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "make-api-stub.py"),
                          "--check"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def _stub_methods() -> dict[str, ast.FunctionDef]:
    tree = ast.parse((REPO_ROOT / api_reference.STUB_PATH).read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TraceAnalysis")
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}


def _normalised(annotation: str) -> str:
    return ast.unparse(ast.parse(annotation, mode="eval"))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_stub_declares_each_generated_method_with_the_registry_types(spec):
    methods = _stub_methods()
    for name in (spec.method, *spec.method_aliases):
        assert name in methods, f"{name} missing from analysis/api.pyi"
        fn = methods[name]
        args = [*fn.args.args[1:], *fn.args.kwonlyargs]
        assert [a.arg for a in args] == [p.name for p in spec.params]
        assert [a.arg for a in fn.args.kwonlyargs] == [p.name for p in spec.params
                                                       if p.keyword_only]
        for arg, p in zip(args, spec.params, strict=True):
            assert ast.unparse(arg.annotation) == _normalised(p.type), (name, p.name)
        assert ast.unparse(fn.returns) == _normalised(spec.returns), name


def test_the_stub_rank_spec_is_the_facade_s():
    from analysis.api import RankSpec

    assert api_reference._namespace()["RankSpec"] == RankSpec


def test_the_stub_has_every_public_member_of_trace_analysis():
    methods = _stub_methods()
    public = {n for n in dir(TraceAnalysis) if not n.startswith("_")}
    stub = ast.parse((REPO_ROOT / api_reference.STUB_PATH).read_text(encoding="utf-8"))
    cls = next(n for n in stub.body if isinstance(n, ast.ClassDef))
    attributes = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}
    assert public <= set(methods) | attributes, public - set(methods) - attributes
    assert set(TraceAnalysis.__annotations__) <= attributes


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_param_has_a_type_that_evaluates_and_a_description(spec):
    ns = api_reference._namespace()
    for p in spec.params:
        assert p.type != "Any" and p.description.strip(), (spec.name, p.name)
        eval(p.type, ns)  # noqa: S307 - the registry's annotation text
    eval(spec.returns, ns)  # noqa: S307


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_generated_method_has_a_typed_signature_and_args_and_returns(spec):
    method = getattr(TraceAnalysis, spec.method)
    sig = inspect.signature(method)
    assert [(n, p.annotation, p.default) for n, p in list(sig.parameters.items())[1:]] == [
        (p.name, p.type, p.default) for p in spec.params]
    assert sig.return_annotation == spec.returns
    doc = method.__doc__
    assert doc.startswith(" ".join(spec.doc.split())[:40])
    if spec.params:
        args = doc[doc.index("\nArgs:\n"):doc.index("\nReturns:\n")]
        for p in spec.params:
            assert f"\n    {p.name} ({p.type}, default {p.default!r}): " in args, p.name
    returns = doc[doc.index("\nReturns:\n"):]
    assert f"    {spec.returns}: " in returns
    for column in spec.column_list("``"):
        assert column in " ".join(returns.split())
    assert set(spec.units) <= set(spec.columns)


def test_columns_say_their_units():
    from analysis.registry import column_unit

    said = {"idle_time(us)": "µs", "step_us": "µs", "kernel_time_us_median": "µs",
            "duration_ms": "ms", "idle_time_pctg": "%", "tensor_core_pct": "%",
            "wait_caused_pct_of_step": "%", "pct_of_peak": "%", "busbw_gbps": "GB/s",
            "bytes": "bytes", "peak_allocated_bytes": "bytes", "data_moved_mb": "MiB",
            "rank": None, "calls": None, "name": None, "bytes_per_call_hint": None}
    assert {c: column_unit(c) for c in said} == said
    launch = catalogue.get("cuda_kernel_launch_stats")
    assert launch.column_list()[1] == "`cpu_duration` (µs)"


def _first_frame(result):
    if isinstance(result, pd.DataFrame):
        return result
    if isinstance(result, tuple):
        return result[0]
    if isinstance(result, dict):
        return next(iter(result.values()))
    raise AssertionError(f"not a table: {type(result)}")


@pytest.fixture(scope="module")
def results(sample_traces_dir):
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path, ranks in ((sample_traces_dir, [0, 1]), (sample_traces_dir / "tensorboard", "all")):
            ta = TraceAnalysis(path, progress=False)
            got = ta.run_many({s.name: {} for s in SPECS}, ranks, errors="return")
            out.update({n: r for n, r in got.items() if not isinstance(r, TraceAnalysisError)})
        roofline = catalogue.get("operator_roofline")  # needs recorded shapes: a hand-made rank
        out["operator_roofline"] = roofline.combine({0: roofline.rank_step(hand_made_rank())})
    return out


def test_the_declared_columns_are_the_columns_each_analysis_returns(results):
    declared = [s for s in SPECS if s.columns]
    assert len(declared) >= 30
    for spec in declared:
        assert spec.name in results, f"{spec.name} did not run on the sample traces"
        assert tuple(_first_frame(results[spec.name]).columns) == spec.columns, spec.name


def test_the_annotated_return_types_hold(results):
    ns = api_reference._namespace()
    for spec in SPECS:
        if spec.name not in results:
            continue
        kind = eval(spec.returns, ns)  # noqa: S307
        origin = getattr(kind, "__origin__", kind)
        assert isinstance(results[spec.name], origin), (spec.name, type(results[spec.name]))


def test_py_typed_and_the_stub_ship_in_the_wheel():
    assert (REPO_ROOT / "analysis" / "py.typed").exists()
    config = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    package_data = config[config.index("[tool.setuptools.package-data]"):].split("\n[")[0]
    shipped = re.search(r'(?m)^analysis = \[(.*)\]', package_data).group(1)
    assert '"py.typed"' in shipped and '"api.pyi"' in shipped


GOOD = """
from analysis.api import TraceAnalysis

ta = TraceAnalysis("traces", kernel_patterns="hta")
overlap = ta.get_comm_comp_overlap(visualize=False, ranks=[0, 1])
breakdown, stats = ta.get_idle_time_breakdown(0, visualize=False, show_idle_interval_stats=True)
launches = ta.get_cuda_kernel_launch_stats(ranks="all", visualize=False)
for rank, frame in launches.items():
    print(rank + 1, frame)
health = ta.check()
steps: list[int] = ta.get_profiler_steps()
"""
BAD = """
from analysis.api import TraceAnalysis

ta = TraceAnalysis("traces")
ta.get_temporal_breakdown(bogus=1)
ta.get_operator_table(group_by="shapes")
ta.get_no_such_analysis()
steps: list[str] = ta.get_profiler_steps()
"""


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy not installed")
def test_mypy_reads_the_stub_and_catches_wrong_calls(tmp_path):
    (tmp_path / "mypy.ini").write_text("[mypy]\nfollow_imports = skip\nignore_missing_imports = True\n")

    def mypy(source: str) -> subprocess.CompletedProcess:
        snippet = tmp_path / "snippet.py"
        snippet.write_text(source)
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"),
             "--cache-dir", str(tmp_path / "cache"), str(snippet),
             str(REPO_ROOT / api_reference.STUB_PATH)],
            capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)

    good = mypy(GOOD)
    assert good.returncode == 0, good.stdout
    bad = mypy(BAD)
    assert bad.returncode == 1
    for expected in ('Unexpected keyword argument "bogus"', "Literal['name', 'name_and_input_shape', 'name_and_stack',",
                     'has no attribute "get_no_such_analysis"', 'variable has type "list[str]"'):
        assert expected in bad.stdout, bad.stdout
