"""``trace-analysis cache info|prune|clear``: inspect, trim or empty the local cache of parsed
traces."""

from __future__ import annotations

import re

import click

_SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_size(text: str) -> int:
    """``"20G"``, ``"20GB"``, ``"20GiB"``, ``"500M"``, ``"1048576"`` → bytes (K, M, G, T are powers
    of 1024, with or without ``B``/``iB``)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", text.upper())
    if not m:
        raise click.BadParameter(f"{text!r} is not a size such as 500M, 20G or 1.5TB")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])


def parse_age(text: str) -> float:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"45s"``, ``"2w"`` → seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text.lower())
    if not m:
        raise click.BadParameter(f"{text!r} is not an age such as 30d, 12h, 90m or 2w")
    return float(m.group(1)) * _AGE_UNITS[m.group(2)]


@click.group("cache")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Cache directory.")
@click.pass_context
def command(ctx: click.Context, cache_dir) -> None:
    """Inspect, prune or clear the cache of parsed traces."""
    ctx.ensure_object(dict)
    ctx.obj["cache_dir"] = cache_dir


@command.command("info")
@click.pass_context
def info(ctx: click.Context) -> None:
    """Where the cache is, how many traces it holds and how big it is."""
    from analysis.kineto.cache import TraceCache

    cache = TraceCache(ctx.obj.get("cache_dir"))
    if cache.dir.exists() and not cache.dir.is_dir():
        from analysis.errors import ConfigError

        raise ConfigError(f"{cache.dir} is a file, not a cache directory (--cache-dir, or "
                          "$TRACE_ANALYSIS_CACHE)")
    stats = cache.info()
    for key, value in dict(stats).items():
        click.echo(f"{key}: {value}")
    if stats["unreadable_entries"]:
        click.echo(f"({stats['unreadable_entries']} entries, "
                   f"{stats['unreadable_bytes'] / 2**20:.1f} MiB, are of another parser version or "
                   "damaged: `trace-analysis cache prune` removes them)")


@command.command("clear")
@click.pass_context
def clear(ctx: click.Context) -> None:
    """Delete every cached trace (and forget which warnings were already shown)."""
    from analysis.cli import repeated_warnings
    from analysis.kineto.cache import TraceCache

    cache = TraceCache(ctx.obj.get("cache_dir"))
    if not cache.dir.is_dir():
        click.echo(f"no cache at {cache.dir}: nothing to clear"
                   + (" (it is a file, not a directory)" if cache.dir.exists() else ""))
        return
    freed = cache.clear()
    repeated_warnings.forget()
    click.echo(f"cleared {cache.dir} ({freed / 2**20:.1f} MiB freed)")


@command.command("prune")
@click.option("--max-size", "max_size", default=None, metavar="SIZE",
              help="Keep at most SIZE (500M, 20G, 1.5T): the least recently used entries go first.")
@click.option("--older-than", "older_than", default=None, metavar="AGE",
              help="Remove the entries not used for AGE (90m, 12h, 30d, 2w).")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@click.pass_context
def prune(ctx: click.Context, max_size, older_than, dry_run) -> None:
    """Remove the cached traces this version can no longer read (another parser version), then
    those not used for --older-than, then the least recently used ones beyond --max-size.
    Entries used in the last hour always stay (a running session may read them back)."""
    from analysis.kineto.cache import TraceCache

    cache = TraceCache(ctx.obj.get("cache_dir"))
    done = cache.prune(
        max_bytes=None if max_size is None else parse_size(max_size),
        older_than_s=None if older_than is None else parse_age(older_than),
        dry_run=dry_run,
    )
    verb = "would remove" if dry_run else "removed"
    reasons = [f"{done['unreadable']} of another parser version"]
    if older_than:
        reasons.append(f"{done['unused']} unused for longer than {older_than}")
    if max_size:
        reasons.append(f"{done['over_size']} beyond {max_size}")
    recent = (f"; {done['kept_recent']} of them beyond {max_size} because used in the last hour "
              "(a running session may read them back)" if done.get("kept_recent") else "")
    click.echo(
        f"{cache.dir}: {verb} {done['removed']} entries ({done['freed'] / 2**20:.1f} MiB): "
        f"{', '.join(reasons)}; kept {done['kept']} entries "
        f"({done['kept_bytes'] / 2**20:.1f} MiB){recent}"
    )
