"""Peak throughput of GPUs: dense matrix TFLOPS per precision and memory bandwidth (TB/s).

The roofline of an op needs the hardware's ceilings. :data:`GPU_SPECS` holds vendor datasheet
numbers (dense, i.e. without 2:4 sparsity; matrix/tensor cores; boost clock) for common training
GPUs, and :func:`gpu_spec` finds the entry for the ``deviceProperties`` name a trace records
(``"NVIDIA H100 80GB HBM3"``, ``"AMD Instinct MI300X VF"``) by the first pattern that matches.

Override it: pass a :class:`GpuSpec` of your own, a table name (``"H100 PCIe"``), or a dict such
as ``{"bf16": 800, "memory_tb_s": 3.0}`` that changes some numbers of the detected GPU.
TB/s and TFLOPS are decimal (10**12).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from analysis.errors import ConfigError

PRECISIONS = ("fp8", "bf16", "fp16", "tf32", "fp32", "fp64")


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's ceilings: ``tflops[precision]`` (dense) and ``memory_tb_s``."""

    name: str
    tflops: Mapping[str, float] = field(default_factory=dict)
    memory_tb_s: float = float("nan")

    def peak_tflops(self, precision: str | None) -> float:
        """The dense peak for ``precision`` (NaN when unknown or unsupported)."""
        return float(self.tflops.get(precision, float("nan"))) if precision else float("nan")

    def ridge_flops_per_byte(self, precision: str | None) -> float:
        """Arithmetic intensity where the roofline turns from memory- to compute-bound."""
        return self.peak_tflops(precision) / self.memory_tb_s


def _spec(name, fp8, bf16, fp16, tf32, fp32, fp64, tb_s) -> GpuSpec:
    values = dict(fp8=fp8, bf16=bf16, fp16=fp16, tf32=tf32, fp32=fp32, fp64=fp64)
    return GpuSpec(name, {k: v for k, v in values.items() if v is not None}, tb_s)


# (pattern on the device name, spec). Sources: NVIDIA V100/A100/H100/H200/L4/HGX B200 datasheets,
# AMD Instinct MI250X/MI300X/MI355X product pages; the newer entries name theirs. None: the
# precision is not supported.
GPU_SPECS: list[tuple[str, GpuSpec]] = [
    #                                 fp8     bf16    fp16    tf32   fp32   fp64   TB/s
    (r"V100.*PCIE", _spec("V100 PCIe", None, None, 112.0, None, 14.0, 7.0, 0.9)),
    (r"V100", _spec("V100 SXM2", None, None, 125.0, None, 15.7, 7.8, 0.9)),
    (
        r"A100.*(PCIE|PCIe).*80|A100 80GB PCIe",
        _spec("A100 80GB PCIe", None, 312.0, 312.0, 156.0, 19.5, 19.5, 1.935),
    ),
    (r"A100.*80", _spec("A100 80GB SXM", None, 312.0, 312.0, 156.0, 19.5, 19.5, 2.039)),
    (r"A100", _spec("A100 40GB", None, 312.0, 312.0, 156.0, 19.5, 19.5, 1.555)),
    (r"H100.*PCIe|H100 PCIE", _spec("H100 PCIe", 1513.0, 756.0, 756.0, 378.0, 51.0, 26.0, 2.0)),
    (r"H100 NVL", _spec("H100 NVL", 1671.0, 835.0, 835.0, 418.0, 60.0, 30.0, 3.9)),
    (r"H100", _spec("H100 SXM", 1979.0, 989.0, 989.0, 494.0, 67.0, 34.0, 3.35)),
    # NVIDIA GH200 Grace Hopper Superchip datasheet: H100 SXM's compute; 96 GB HBM3 at 4 TB/s
    # ("GH200 480GB": 480 GB of LPDDR5X beside it), or 144 GB HBM3e at 4.9 TB/s. Before "H200",
    # which its name contains (a GH200 480GB trace of a sweep was given H200's 4.8 TB/s).
    (r"GH200.*(144|HBM3e)", _spec("GH200 144GB HBM3e", 1979.0, 989.0, 989.0, 494.0, 67.0, 34.0, 4.9)),
    (r"GH200", _spec("GH200 96GB HBM3", 1979.0, 989.0, 989.0, 494.0, 67.0, 34.0, 4.0)),
    (r"H200", _spec("H200 SXM", 1979.0, 989.0, 989.0, 494.0, 67.0, 34.0, 4.8)),
    # NVIDIA H800 SXM5 datasheet: H100 SXM's tensor cores and HBM3, FP64 cut to 1 TFLOPS (and
    # NVLink to 400 GB/s: see findings.EXPECTED_BUSBW_GBPS). DeepSeek's published traces.
    (r"H800", _spec("H800 SXM", 1979.0, 989.0, 989.0, 494.0, 67.0, 1.0, 3.35)),
    # NVIDIA HGX H20 product brief: 296 FP8 / 148 BF16 / 74 TF32 dense TFLOPS, 44 FP32,
    # 1 FP64, 96 GB HBM3 at 4.0 TB/s. r"H20\b": not the H200.
    (r"H20\b", _spec("H20", 296.0, 148.0, 148.0, 74.0, 44.0, 1.0, 4.0)),
    # NVIDIA GB200 NVL72 datasheet, per GPU (half a superchip), dense (the sheet's sparse
    # numbers halved): 5 PF FP8, 2.5 PF BF16/FP16, 1.25 PF TF32, 45 TF FP64; 8 TB/s HBM3e.
    # FP32 is not on the sheet: B200's 75 TF. Before "B200", which its name contains.
    (r"GB200", _spec("GB200", 5000.0, 2500.0, 2500.0, 1250.0, 75.0, 45.0, 8.0)),
    (r"B200", _spec("B200", 4500.0, 2250.0, 2250.0, 1100.0, 75.0, 37.0, 8.0)),
    (r"\bL4\b", _spec("L4", 242.5, 121.0, 121.0, 60.0, 30.3, None, 0.3)),
    (r"MI250X", _spec("MI250X", None, 383.0, 383.0, None, 95.7, 95.7, 3.2768)),
    (r"MI300X", _spec("MI300X", 2614.9, 1307.4, 1307.4, 653.7, 163.4, 163.4, 5.3)),
    # AMD Instinct MI325X product page / datasheet: MI300X's compute (304 CUs), 256 GB HBM3E at
    # 6 TB/s.
    (r"MI325X", _spec("MI325X", 2614.9, 1307.4, 1307.4, 653.7, 163.4, 163.4, 6.0)),
    (r"MI355X", _spec("MI355X", 5033.0, 2516.6, 2516.6, None, 157.3, 78.6, 8.0)),
]


def gpu_spec(device_name: str | None, override: Any = None) -> GpuSpec | None:
    """The spec of ``device_name`` (None when unknown), adjusted by ``override``.

    ``override``: a :class:`GpuSpec` (used as is), a name to look up instead of ``device_name``,
    or a dict of numbers (``{"bf16": 800.0, "memory_tb_s": 3.0}``) replacing those of the detected
    spec (or making a new one named ``"custom"`` when the GPU is unknown).
    """
    if isinstance(override, GpuSpec):
        return override
    if isinstance(override, str):
        spec = lookup(override)
        if spec is None:
            raise ConfigError(f"unknown GPU {override!r}; known: {[s.name for _, s in GPU_SPECS]}")
        return spec
    spec = lookup(device_name) if device_name else None
    if override is None:
        return spec
    if not isinstance(override, Mapping):
        raise ConfigError(f"gpu must be a GpuSpec, a GPU name or a dict of peaks, not {override!r}")
    unknown = set(override) - set(PRECISIONS) - {"memory_tb_s"}
    if unknown:
        raise ConfigError(
            f"unknown GPU peak keys {sorted(unknown)}; use {PRECISIONS} and memory_tb_s"
        )
    base = spec or GpuSpec("custom")
    tflops = {**base.tflops, **{k: float(v) for k, v in override.items() if k in PRECISIONS}}
    return replace(
        base, tflops=tflops, memory_tb_s=float(override.get("memory_tb_s", base.memory_tb_s))
    )


def lookup(name: str) -> GpuSpec | None:
    """The first table entry whose pattern matches ``name`` (case-insensitive), or None."""
    for pattern, spec in GPU_SPECS:
        if re.search(pattern, name, flags=re.IGNORECASE) or name.lower() == spec.name.lower():
            return spec
    return None
