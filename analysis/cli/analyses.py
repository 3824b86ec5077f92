"""``trace-analysis analyses``: the registered analyses, their facade methods and report titles."""

from __future__ import annotations

import click


@click.command("analyses")
def command() -> None:
    """List the analyses (names usable with `report --analyses`)."""
    from analysis.analyses import analyses

    for name, spec in analyses().items():
        where = {"section": "report section", "lead": "report lead", "context": "report table",
                 "none": "API only"}[spec.placement]
        click.echo(f"{name:<24} ta.{spec.method:<32} {where:<15} {spec.title}")
