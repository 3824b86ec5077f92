"""``trace-analysis cache info|clear``: inspect or empty the local cache of parsed traces."""

from __future__ import annotations

import click


@click.group("cache")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Cache directory.")
@click.pass_context
def command(ctx: click.Context, cache_dir) -> None:
    """Inspect or clear the cache of parsed traces."""
    ctx.ensure_object(dict)
    ctx.obj["cache_dir"] = cache_dir


@command.command("info")
@click.pass_context
def info(ctx: click.Context) -> None:
    """Where the cache is, how many traces it holds and how big it is."""
    from analysis.kineto.cache import TraceCache

    stats = TraceCache(ctx.obj.get("cache_dir")).info()
    for key, value in dict(stats).items():
        click.echo(f"{key}: {value}")


@command.command("clear")
@click.pass_context
def clear(ctx: click.Context) -> None:
    """Delete every cached trace (and forget which warnings were already shown)."""
    from analysis.cli import repeated_warnings
    from analysis.kineto.cache import TraceCache

    cache = TraceCache(ctx.obj.get("cache_dir"))
    freed = cache.clear()
    repeated_warnings.forget()
    click.echo(f"cleared {cache.dir} ({freed / 2**20:.1f} MiB freed)")
