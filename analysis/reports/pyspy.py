"""py-spy reports, as memray's reporters: a function reads ``py-spy record -f raw`` (or
``-f speedscope``) files (one per node, local or ``gs://``) and returns or writes the report.

- :func:`samples_report`: where the samples go (leaf function, library function, share), with
  the counts of samples and skipped lines: a :class:`SamplesReport`;
- :func:`write_flamegraph`: the flame graph of the files written to an ``.html`` (interactive,
  offline), ``.svg``, ``.png`` or ``.pdf`` file; ``ExportError`` names a file that cannot be
  written.

``trace-analysis pyspy-report`` and ``trace-analysis flamegraph`` parse their arguments and call
these. The numbers come from :mod:`analysis.pyspy.samples`, the figure from
:mod:`analysis.figures.flamegraph`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.errors import ConfigError, ExportError

# What write_flamegraph writes, by the output file's suffix (the static ones through kaleido).
FLAMEGRAPH_FORMATS = ("html", "svg", "png", "pdf", "jpeg", "webp")


@dataclass
class SamplesReport:
    """``analysis.pyspy.samples.pyspy_report``'s table of the files, and the files' counts."""

    table: pd.DataFrame  # file (absent for one file), leaf/library frames, samples, samples_pctg
    files: int
    samples: int  # in all files
    skipped_lines: int  # malformed lines skipped (on_error="skip")

    def lines(self) -> list[str]:
        """The table (shares to 2 decimals) and a line of counts, as text lines."""
        note = f"{self.samples} samples in {self.files} file(s)"
        if self.skipped_lines:
            note += f"; {self.skipped_lines} malformed line(s) skipped"
        return [self.table.assign(samples_pctg=self.table["samples_pctg"].round(2))
                .to_string(index=False), note]


def samples_report(
    files: Iterable[str | os.PathLike], *, library_name: str | None = None,
    aggregate_leaf_paths: bool = False, num_rows: int | None = 20, on_error: str = "raise",
    storage_options: Mapping[str, Any] | None = None,
) -> SamplesReport:
    """Where the samples of ``files`` go (``analysis.pyspy.samples.pyspy_report``'s arguments);
    the ``file`` column is left out when there is one file."""
    from analysis.pyspy.samples import load_profiles, pyspy_report

    profiles = load_profiles(list(files), on_error=on_error, storage_options=storage_options)
    table = pyspy_report(profiles, library_name=library_name,
                         aggregate_leaf_paths=aggregate_leaf_paths, num_rows=num_rows)
    if len(profiles) == 1:
        table = table.drop(columns="file")
    return SamplesReport(table, len(profiles), sum(p.total_samples for p in profiles),
                         sum(p.skipped_lines for p in profiles))


def write_flamegraph(
    files: Iterable[str | os.PathLike], output: str | os.PathLike, *, min_width: float = 0.005,
    title: str | None = None, on_error: str = "raise",
    storage_options: Mapping[str, Any] | None = None,
) -> Path:
    """Write the flame graph of ``files`` (one root per file) to ``output``, in the format its
    suffix names (:data:`FLAMEGRAPH_FORMATS`; ``.html`` embeds plotly.js, ~4.8 MB, and opens
    offline); frames under ``min_width`` of the samples are left out. Returns the path."""
    from analysis.figures.flamegraph import flamegraph
    from analysis.pyspy.samples import call_tree, load_profiles

    out = Path(output)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in FLAMEGRAPH_FORMATS:
        raise ConfigError(f"{out.name}: use a .html, .svg, .png or .pdf file")
    profiles = load_profiles(list(files), on_error=on_error, storage_options=storage_options)
    fig = flamegraph(call_tree(profiles), min_width=min_width, title=title)
    try:
        if fmt == "html":
            fig.write_html(out, include_plotlyjs=True)
        else:
            from analysis.figures.export import kaleido_server, quiet_kaleido, write_image

            with kaleido_server(), quiet_kaleido():
                write_image(fig, out, fmt, width=fig.layout.width, height=fig.layout.height)
    except OSError as exc:
        raise ExportError(out, f"cannot write: {exc.strerror or exc}") from exc
    return out
