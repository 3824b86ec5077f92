"""The GPU peak table: lookup by the deviceProperties names traces record, and overrides."""

from __future__ import annotations

import math

import pytest

from analysis.errors import ConfigError
from analysis.metrics.roofline.gpu_specs import GPU_SPECS, GpuSpec, gpu_spec, lookup


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA L4", "L4"),
        ("AMD Instinct MI250X", "MI250X"),
        ("AMD Instinct MI300X VF", "MI300X"),
        ("AMD Instinct MI355X", "MI355X"),
        ("NVIDIA H800", "H800 SXM"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA GB200", "GB200"),
        ("AMD Instinct MI325X", "MI325X"),
        ("AMD Instinct MI325X VF", "MI325X"),
        ("NVIDIA GH200 480GB", "GH200 96GB HBM3"),  # was H200's 4.8 TB/s
        ("NVIDIA GH200 144G HBM3e", "GH200 144GB HBM3e"),
        ("NVIDIA H200", "H200 SXM"),
    ],
)
def test_device_names_find_their_entry(device, expected):
    assert lookup(device).name == expected


def test_unknown_gpu_has_no_spec():
    assert lookup("Some Future Accelerator") is None
    assert gpu_spec("Some Future Accelerator") is None


def test_every_entry_has_bandwidth_and_a_half_precision_peak():
    for _, spec in GPU_SPECS:
        assert spec.memory_tb_s > 0 and spec.peak_tflops("fp16") > 0


def test_h100_ridge_point():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert h100.peak_tflops("bf16") == 989.0 and h100.memory_tb_s == 3.35
    assert h100.ridge_flops_per_byte("bf16") == pytest.approx(989.0 / 3.35)
    assert math.isnan(h100.peak_tflops(None)) and math.isnan(lookup("V100").peak_tflops("bf16"))


def test_overrides():
    mine = GpuSpec("mine", {"bf16": 100.0}, 1.0)
    assert gpu_spec("NVIDIA H100 80GB HBM3", mine) is mine
    assert gpu_spec("NVIDIA H100 80GB HBM3", "H200").name == "H200 SXM"
    tuned = gpu_spec("NVIDIA H100 80GB HBM3", {"bf16": 800, "memory_tb_s": 3.0})
    assert (tuned.peak_tflops("bf16"), tuned.memory_tb_s, tuned.peak_tflops("fp8")) == (
        800,
        3.0,
        1979,
    )
    custom = gpu_spec("Some Future Accelerator", {"bf16": 5000, "memory_tb_s": 10})
    assert custom.name == "custom" and custom.ridge_flops_per_byte("bf16") == 500
    with pytest.raises(ConfigError, match="unknown GPU peak keys"):
        gpu_spec("NVIDIA H100", {"bf61": 1})
    with pytest.raises(ConfigError, match="unknown GPU"):
        gpu_spec(None, "Z9000")


def test_expected_bus_bandwidth_of_the_newer_gpus():
    from analysis.metrics.findings.findings import EXPECTED_BUSBW_GBPS

    def expected(gpu):
        return next(v for k, v in EXPECTED_BUSBW_GBPS.items() if k in gpu)

    # H800's NVLink is under half of H100's; "NVIDIA H200" must not read as the H20
    assert expected("NVIDIA H800") < expected("NVIDIA H100 80GB HBM3") / 2
    assert expected("NVIDIA H200") == EXPECTED_BUSBW_GBPS["H200"]
    assert expected("NVIDIA H20") == EXPECTED_BUSBW_GBPS["H20"]
    assert expected("AMD Instinct MI325X") == EXPECTED_BUSBW_GBPS["MI300"]
