"""``trace-analysis schedule``: which steps a profiler schedule skips, waits, warms up and records."""

from __future__ import annotations

import click


@click.command("schedule")
@click.option("--skip-first", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--wait", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True)
@click.option("--active", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--repeat", type=click.IntRange(min=0), default=1, show_default=True,
              help="Number of cycles; 0 = until the loop ends.")
@click.option("--skip-first-wait", is_flag=True, help="Drop the wait of the first cycle.")
@click.option("--steps", type=click.IntRange(min=0), required=True,
              help="Number of training steps in the loop.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Read the schedule from this YAML profiler config instead.")
def schedule(skip_first, wait, warmup, active, repeat, skip_first_wait, steps, config_path) -> None:
    """Print, step by step, what torch.profiler does under a schedule and when traces are saved."""
    from analysis.capture import ProfilerConfig, schedule_table

    if config_path:
        config = ProfilerConfig.from_yaml(config_path)
    else:
        config = ProfilerConfig(skip_first=skip_first, wait=wait, warmup=warmup, active=active,
                                repeat=repeat, skip_first_wait=skip_first_wait)
    table = schedule_table(config, steps=steps)
    if table.empty:
        click.echo("no step: --steps 0 runs no training step, so nothing is profiled")
        return
    # a step outside every cycle (skipped) has no cycle: "–", not pandas' <NA>
    shown = table.astype({"cycle": object}).fillna({"cycle": "–"})
    click.echo(shown.to_string(index=False))
    saved = table.loc[table["trace_saved"], "step"].tolist()
    click.echo(f"\n{len(saved)} trace(s) per rank, saved after step(s): {saved}")


command = schedule
