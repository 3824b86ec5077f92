"""Click options shared by the commands that load traces."""

from __future__ import annotations

import click


def int_list(ctx, param, value: str | None) -> list[int] | None:
    """``"0,3,5"`` → ``[0, 3, 5]``; ``None``, ``""`` or ``"all"`` → None. A usage error (exit 2)
    otherwise, before any trace is read."""
    if value in (None, "") or str(value).strip().lower() == "all":
        return None
    try:
        values = [int(v) for v in str(value).split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(
            f"expected 'all' or a comma-separated list of integers, not {value!r}") from None
    if not values:
        raise click.BadParameter(f"no value in {value!r}")
    return values


def trace_loading_options(func):
    """--patterns, --no-cache, --cache-dir, --on-error, --include-last-step, --gpu-events,
    --window, --capture-trace, --quiet."""
    options = [
        click.option(
            "--patterns",
            "kernel_patterns",
            type=click.Choice(["default", "hta"]),
            default="default",
            show_default=True,
            help="Kernel classification preset ('hta' reproduces HolisticTraceAnalysis 0.5.0).",
        ),
        click.option("--no-cache", is_flag=True, help="Parse the traces again; do not read or write the cache."),
        click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Cache directory."),
        click.option(
            "--on-error",
            type=click.Choice(["raise", "skip"]),
            default="raise",
            show_default=True,
            help="Stop at the first unreadable trace, or skip it and go on.",
        ),
        click.option("--include-last-step", is_flag=True, help="Also analyse the last ProfilerStep."),
        click.option(
            "--gpu-events",
            type=click.Choice(["launched", "all", "hta"]),
            default=None,
            help="GPU events analysed: 'launched' in the window (default), 'all' (also those no "
                 "call in the trace launched), 'hta' (HTA's rule; default with --patterns hta).",
        ),
        click.option(
            "--window",
            type=click.Choice(["auto", "steps", "iterations"]),
            default=None,
            help="What the analysed window is cut at: profiler steps, a serving engine's "
                 "steady-state iterations, or 'auto' (steps when the traces have any; the "
                 "default, but 'steps' with --patterns hta, as HTA analyses a trace whole).",
        ),
        click.option(
            "--capture-trace",
            type=click.Path(exists=True),
            default=None,
            help="Graph-capture trace (file or folder) of CUDA/HIP graph replay traces (default: "
                 "the capture_traces/ folder beside each).",
        ),
        click.option("-q", "--quiet", is_flag=True, help="No progress bars or notes."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def open_analysis(traces: str, kernel_patterns: str, no_cache: bool, cache_dir, on_error: str,
                  include_last_step: bool, quiet: bool, gpu_events: str | None = None,
                  window: str | None = None, capture_trace: str | None = None):
    """Build the TraceAnalysis the options describe."""
    from analysis.api import TraceAnalysis

    if quiet:
        from analysis.cli import repeated_warnings

        repeated_warnings.quiet()

    return TraceAnalysis(
        trace_dir=traces,
        include_last_profiler_step=include_last_step,
        kernel_patterns=kernel_patterns,
        gpu_events=gpu_events,
        window=window,
        capture_trace=capture_trace,
        use_cache=not no_cache,
        cache_dir=cache_dir,
        on_error=on_error,
        progress=False if quiet else None,
    )


def strict_option(func):
    """--strict: exit 1 when any analysis could not run (default: 0 once the traces loaded)."""
    return click.option(
        "--strict", is_flag=True,
        help="Exit with status 1 when any analysis could not run on any rank (default: 0 once the "
             "traces loaded; the failures are listed and warned about on stderr).",
    )(func)


def report_failures(failures, strict: bool, *, echo_table: bool = False) -> None:
    """Warn on stderr about each (analysis, rank) that could not run (its traceback too with
    ``--debug``), print the "could not run" table when ``echo_table``, and exit 1 under
    ``--strict`` when there is any."""
    if not failures:
        return
    from analysis import registry

    ctx = click.get_current_context(silent=True)
    debug = bool(ctx and ctx.find_root().obj and ctx.find_root().obj.get("debug"))
    if echo_table:
        click.echo("")
        click.echo("could not run:")
        click.echo(registry.failures_table(failures).to_string(index=False))
    for failure in failures:
        where = "all ranks" if failure.rank is None else f"rank {failure.rank}"
        click.echo(f"warning: could not run {failure.analysis} ({where}): {failure.message}", err=True)
        text = getattr(failure.error, "traceback_text", "")
        if debug and text:
            click.echo(text, err=True)
    if strict:
        raise click.exceptions.Exit(1)
