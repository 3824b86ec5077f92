"""The catalogue's contract, checked for every registered analysis.

Parametrized over ``analysis.analyses`` (not a hand list), so an analysis added to any family's
``catalogue.py`` is checked without being named here:

- every analysis gives a result or the project's own error on each of the contract's traces,
  never a foreign exception nor a failure on a rank (``AnalysisFailedError``), as the
  robustness matrix requires on every other trace (tests/unit/test_robustness_matrix.py);
- the local engine and the Dask engine (the session's cluster) give the same result, value for
  value (or the same error), on the sample traces and on three small hand-made traces that have
  what the sample traces lack (memory profile, modules and call stacks; recorded shapes; a serving
  engine's iterations), and each analysis gives a result on at least one of them; each other
  value of a ``Literal`` option (the operator view's stack groupings) is checked the same way;
- its figures have a title, and every numeric axis (and colour bar) says its unit;
- a report section has a title and a "how to read it"; its report cards show numbers, never "nan";
- where HTA 0.5.0's ``TraceAnalysis`` has the method, ours takes HTA's arguments, in HTA's order,
  with HTA's defaults (more keyword-only arguments allowed): any HTA call works unchanged.
"""

from __future__ import annotations

import ast
import gzip
import inspect
import json
import warnings

import plotly.io as pio
import pytest
from catalogue_checks import assert_no_bug, assert_same, every_analysis
from figure_checks import figure_problems
from hta_oracle import hta_answer
from roofline_traces import trace_events

from analysis import analyses as catalogue
from analysis.api import TraceAnalysis
from analysis.figures import style
from analysis.testing import tensorboard_traces
from analysis.testing.graph_traces import serving_events

NAMES = list(catalogue.analyses())


def _variants() -> dict[str, tuple[str, dict]]:
    """Each other value of an analysis's ``Literal`` options (the TensorBoard operator view's stack
    groupings, ...): ``{"name[param=value]": (name, options)}``; they may read other extras."""
    out = {}
    for name, options in every_analysis().items():
        for p in catalogue.get(name).params:
            if p.role != "option" or not p.type.startswith("Literal["):
                continue
            for value in ast.literal_eval(p.type.removeprefix("Literal")):
                if value != options.get(p.name, p.default):
                    out[f"{name}[{p.name}={value}]"] = (name, {**options, p.name: value})
    return out


VARIANTS = _variants()
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def inputs(sample_traces_dir, tmp_path_factory) -> dict:
    """The traces the contract runs on: the sample traces (8 ranks), a TensorBoard-style trace with
    memory events, modules and call stacks, a two-rank trace with recorded shapes (the roofline's input) and a
    serving trace (vLLM-style iterations: prefill, decode, mixed)."""
    tb = tmp_path_factory.mktemp("contract-tensorboard")
    tensorboard_traces.write(tb / "rank-0.pt.trace.json", memory=True, modules=True, stacks=True)
    shapes = tmp_path_factory.mktemp("contract-shapes")
    for rank in (0, 1):
        trace = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                 "distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": trace_events()}
        (shapes / f"rank{rank}.pt.trace.json.gz").write_bytes(
            gzip.compress(json.dumps(trace).encode(), mtime=0))
    serving = tmp_path_factory.mktemp("contract-serving")
    (serving / "serving.json").write_text(json.dumps(
        {"traceEvents": serving_events(["prefill", "decode", "decode", "mixed", "decode"])}))
    return {"sample": sample_traces_dir, "tensorboard": tb, "shapes": shapes, "serving": serving}


def _run_all(path, label: str, **options) -> dict:
    """Every analysis on the traces at ``path``, in one batch (errors as results; an analysis that
    failed on a rank, as its ``AnalysisFailedError``), and the variants."""
    gpu_events = "all" if label == "shapes" else None  # its kernels' launches are not all there
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta = TraceAnalysis(path, progress=False, gpu_events=gpu_events, **options)
        return _with_variants(ta, ta.run_many(every_analysis(), "all", errors="return"))


def _with_variants(ta: TraceAnalysis, results: dict) -> dict:
    """``results`` and, under their ``VARIANTS`` keys, the analyses run with their other options."""
    results = dict(results)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, (name, opts) in VARIANTS.items():
            results[key] = ta.run_many({name: opts}, "all", errors="return")[name]
    return results


@pytest.fixture(scope="module")
def contract_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("contract-cache")


@pytest.fixture(scope="module")
def local_results(inputs, contract_cache) -> dict:
    return {label: _run_all(path, label, cache_dir=contract_cache)
            for label, path in inputs.items()}


@pytest.fixture(scope="module")
def dask_results(inputs, dask_client, contract_cache, local_results, sample_on_dask) -> dict:
    """The workers read the traces the local run parsed into the cache, and compute every analysis
    themselves: the Dask engine keeps no per-rank parts in the cache. The sample traces' batch is
    the session's (``sample_on_dask``, tests/conftest.py: parsed on the workers, shared with
    tests/unit/engines/test_dask.py); their variants run here."""
    on_dask, sample = sample_on_dask
    return {label: _with_variants(on_dask, sample) if label == "sample" else
            _run_all(path, label, client=dask_client, cache_dir=contract_cache, timeout=TIMEOUT_S)
            for label, path in inputs.items()}


# ---------------------------------------------------------------------------------------------
# Local equals Dask


@pytest.mark.parametrize("name", NAMES + list(VARIANTS))
def test_local_equals_dask(name, local_results, dask_results):
    results = 0
    for label, local in local_results.items():
        assert_no_bug(local[name], f"{name} on {label}")
        assert_same(local[name], dask_results[label][name], f"{name} on {label}")
        results += not isinstance(local[name], Exception)
    assert results, (f"{name} gives a result on none of the contract's traces "
                     f"({[str(r[name]) for r in local_results.values()]}): add one that has what "
                     "it needs to the `inputs` fixture")


# ---------------------------------------------------------------------------------------------
# Figures: a title, and units on every numeric axis

def drawn(name, local_results) -> list[tuple[str, str, object]]:
    spec = catalogue.get(name)
    out = []
    for label, results in local_results.items():
        if not isinstance(results[name], Exception):
            out += [(label, stem, fig) for stem, fig in spec.draw(results[name]).items()]
    return out


@pytest.mark.parametrize("name", [n for n, s in catalogue.analyses().items() if s.figures])
def test_figures_have_titles_and_units(name, local_results):
    figures = drawn(name, local_results)
    assert figures, f"{name} declares figures but drew none on the contract's traces"
    for label, stem, fig in figures:
        assert figure_problems(fig) == [], f"{name}: {stem} on {label}"
        # the package's template keeps plotly_white's defaults for the trace types it draws only
        untemplated = {t.type for t in fig.data} - set(style.TRACE_TYPES)
        assert not [t for t in untemplated if pio.templates[style.BASE_TEMPLATE].data[t]], (
            f"{name}: {stem} draws {sorted(untemplated)}: add them to style.TRACE_TYPES")


# ---------------------------------------------------------------------------------------------
# Report sections


@pytest.mark.parametrize("name", [n for n, s in catalogue.analyses().items() if s.key_numbers])
def test_report_cards_show_numbers_not_nan(name, local_results):
    """A report card is a number: a value a trace does not have (no ``blocks per SM`` args: no
    est. SM efficiency) is no card, never "nan %" (10 real traces showed one)."""
    spec = catalogue.get(name)
    for label, results in local_results.items():
        result = results[name]
        if isinstance(result, Exception):
            continue
        for card, value in spec.key_numbers(result):
            assert not any(bad in value.lower() for bad in ("nan", "none", "inf")), (label, card, value)


@pytest.mark.parametrize("name", NAMES)
def test_report_sections_have_a_title_and_how_to_read(name):
    spec = catalogue.get(name)
    if spec.placement in ("section", "lead"):
        assert spec.title.strip(), f"{name} is a report section without a title"
        assert len(spec.how_to_read.split()) >= 8, f"{name}'s section says too little on how to read it"
    elif spec.placement == "context":
        assert spec.title.strip(), f"{name} is a report table without a title"


# ---------------------------------------------------------------------------------------------
# HTA's signatures


def _parameters(function) -> list[tuple]:
    return [(p.name, p.kind.name, p.default is not inspect.Parameter.empty,
             None if p.default is inspect.Parameter.empty else repr(p.default))
            for p in list(inspect.signature(function).parameters.values())[1:]]  # past self


def hta_signatures() -> dict[str, list[tuple]]:
    """HTA 0.5.0's ``TraceAnalysis`` methods and their parameters (stored; ``HTA_LIVE=1``: live)."""

    def live():
        hta = pytest.importorskip("hta.trace_analysis").TraceAnalysis
        return {name: _parameters(getattr(hta, name))
                for name in dir(hta) if not name.startswith("_") and callable(getattr(hta, name))}

    return hta_answer([], "TraceAnalysis signatures", live, name="signatures")


@pytest.mark.parametrize("name", NAMES)
def test_hta_signature_where_hta_has_the_method(name):
    method = catalogue.get(name).method
    theirs = hta_signatures().get(method)
    if theirs is None:
        return  # HTA has no such method: nothing to be compatible with
    ours = _parameters(getattr(TraceAnalysis, method))
    # HTA's arguments first, same names, kinds and order; its defaults where it has them (ours may
    # add a default where HTA has none)
    assert [p[:2] for p in ours[:len(theirs)]] == [p[:2] for p in theirs], method
    for (p, _kind, has_default, default), their in zip(ours, theirs, strict=False):
        if their[2]:
            assert (has_default, default) == (True, their[3]), f"{method}({p}=...): HTA's default is {their[3]}"
    extra = ours[len(theirs):]
    assert all(kind == "KEYWORD_ONLY" and has_default for _, kind, has_default, _ in extra), (
        f"{method}: arguments HTA does not have must be keyword-only with a default: {extra}")


def test_the_signature_check_covers_htas_methods():
    """The HTA methods we implement are found (the check is not vacuous)."""
    ours = {spec.method for spec in catalogue.analyses().values()}
    assert {"get_temporal_breakdown", "get_idle_time_breakdown", "get_gpu_kernel_breakdown",
            "get_cuda_kernel_launch_stats", "get_comm_comp_overlap"} <= ours & set(hta_signatures())
