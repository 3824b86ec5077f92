"""Shared test fixtures: where the bundled sample traces and the real HTA test traces live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_TRACES = REPO_ROOT / "sample_traces"
HTA_TRACES = REPO_ROOT.parent / "shared" / "traces" / "hta"

# The real-GPU trace folders of ../shared/traces/hta that HTA 0.5.0 can analyse.
HTA_GPU_TRACE_DIRS = [
    "trace_filter",
    "df_index_resolver",
    "negative_queue_length_values_check",
    "nccl_parser_config",
    "ns_resolution_trace",
    "critical_path/alexnet",
    "amd_trace",
    "triton_example",
    "mtia_inference_trace",
]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def sample_traces_dir() -> Path:
    if not any(SAMPLE_TRACES.glob("*.json.gz")):
        pytest.skip("sample_traces/ has no traces (run `python -m analysis.synthetic sample_traces`)")
    return SAMPLE_TRACES


@pytest.fixture(scope="session")
def hta_traces_dir() -> Path:
    """../shared/traces/hta beside the checkout; absent in a user's fresh clone."""
    if not HTA_TRACES.is_dir():
        pytest.skip(f"real GPU traces not available: {HTA_TRACES} does not exist")
    return HTA_TRACES
