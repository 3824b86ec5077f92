"""``trace-analysis analyses``: the registered analyses, their facade methods and report titles."""

from __future__ import annotations

import click


@click.command("analyses")
def command() -> None:
    """List the analyses (names usable with `report --analyses`; earlier names still work)."""
    from analysis.analyses import analyses

    for name, spec in analyses().items():
        where = {"section": "report section", "lead": "report lead", "context": "report table",
                 "none": "API only"}[spec.placement]
        earlier = [*spec.aliases, *(f"ta.{m}" for m in spec.method_aliases)]
        click.echo(f"{name:<28} ta.{spec.method:<32} {where:<15} {spec.title}"
                   + (f" (earlier: {', '.join(earlier)})" if earlier else ""))
