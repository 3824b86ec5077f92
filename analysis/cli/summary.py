"""``trace-analysis summary TRACES``: the headline numbers per rank, as a table in the terminal."""

from __future__ import annotations

import click

from analysis.cli.options import (
    open_analysis,
    report_failures,
    strict_option,
    trace_loading_options,
)


@click.command("summary")
@click.argument("traces")
@click.option("--wide", is_flag=True,
              help="Every column on one line per rank (default: fit the terminal, COLUMNS or 100).")
@trace_loading_options
@strict_option
def command(traces: str, wide: bool, strict: bool, **options) -> None:
    """Findings, then the headline numbers per rank, for TRACES (a directory, a file or a gs:// URL).

    Ranks an analysis left out (no GPU events) are named under the table; analyses that cannot
    run are listed at the end ("could not run"); the exit status is 0 once the traces loaded (1
    with --strict when something could not run)."""
    from analysis import analyses as catalogue
    from analysis import registry
    from analysis.cli import terminal
    from analysis.errors import AnalysisFailedError, NoGPUEventsError

    ta = open_analysis(traces, **options)
    # one batch: the findings and the headline columns share their analyses (stragglers, ...)
    failures: list[registry.Failure] = []
    left_out: list[registry.Failure] = []
    results = ta.run_many(dict.fromkeys(["findings", *catalogue.headline_names()], {}), "all",
                          errors="return", failures=failures, left_out=left_out)
    found = results["findings"]
    lines = []
    if isinstance(found, Exception):
        lines += terminal.wrap(f"no findings: {found}", indent="    ")
    else:
        for r in found.itertuples():
            lines += terminal.wrap(f"{r.title}: {r.detail}", indent="    ", first=f"[{r.severity}] ")
        if not lines:
            lines = ["no finding: nothing the rules check for is wrong"]
        for rule, why in found.attrs.get("not_run", {}).items():
            lines += terminal.wrap(f"{rule}: {why}", indent="    ", first="[not run] ")
    lines.append("")
    try:
        headline = catalogue.headline_table(results)
        lines += (["no headline numbers"] if headline is None
                  else terminal.table(headline, key=["rank"], wide=wide))
    except Exception as exc:  # noqa: BLE001 - the table's bug leaves the findings printed
        failures.append(registry.Failure("headline", None, AnalysisFailedError.wrap("headline", None, exc)))
        lines.append("no headline numbers")
    for note in registry.left_out_notes(left_out).values():
        lines += terminal.wrap(note, indent="    ", first="[left out] ")
    for value in results.values():  # every rank left out: the analysis itself has no result
        if isinstance(value, NoGPUEventsError):
            lines += terminal.wrap(str(value), indent="    ", first="[left out] ")
    click.echo("\n".join(lines))
    report_failures(failures, strict, echo_table=True)
