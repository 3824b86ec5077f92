"""The ``trace-analysis`` command line: one small module per sub-command (see ``COMMANDS``).

Each command parses its arguments and calls the library; nothing is computed here. Heavy imports
(pandas, plotly, torch) happen inside the commands, so ``trace-analysis --help`` starts quickly.
Failures the user can fix print one line (``error: <file>: <reason>``) and exit non-zero; ``--debug``
shows the traceback instead.
"""

from __future__ import annotations

import importlib
import sys

import click

# module (under analysis.cli) → attribute holding a click command or a list of them
COMMANDS: dict[str, str] = {
    "summary": "command",
    "report": "command",
    "compare": "command",
    "analyses": "command",
    "cache": "command",
    "schedule": "command",
    "pyspy": "commands",
    "memory": "command",
    "memory_timeline": "command",
    "check": "command",
    "merge": "command",
}


class _Group(click.Group):
    """Turns the project's errors into a one-line message and exit code 1 (2 for usage errors)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
            if ctx.obj and ctx.obj.get("debug"):
                raise
            from analysis.errors import TraceAnalysisError, printable

            prefix = "error" if isinstance(exc, TraceAnalysisError) else type(exc).__name__
            # one line, always: a newline in a file name or a message cannot start a second one
            message = printable(" ".join(str(exc).splitlines()))
            click.echo(f"{prefix}: {message} (rerun with --debug for details)", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option("-v", "--verbose", is_flag=True,
              help="Repeat the warnings about the traces that an earlier run already printed.")
@click.version_option(package_name="trace-analysis")
@click.pass_context
def main(ctx: click.Context, debug: bool, verbose: bool) -> None:
    """Analyse PyTorch profiler (Kineto) traces: local directories or gs:// URLs."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    if not debug:
        import logging
        import warnings

        from analysis.cli import repeated_warnings

        # Warnings (skipped files, guessed ranks) read as one line each, without source lines,
        # and once per traces: the next run over the same traces only counts them.
        warnings.formatwarning = _one_line_warning
        ctx.call_on_close(repeated_warnings.install(verbose).close)

        # gcsfs logs whole aiohttp tracebacks before raising; our one-line error says it all.
        logging.getLogger("gcsfs").setLevel(logging.CRITICAL)


def _one_line_warning(message, category=None, *args, **kwargs) -> str:
    from analysis.errors import printable

    return f"warning: {printable(' '.join(str(message).splitlines()))}\n"


def _register() -> None:
    for module_name, attr in COMMANDS.items():
        try:
            module = importlib.import_module(f"{__name__}.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{module_name}":
                continue  # command not built in this installation
            raise
        found = getattr(module, attr)
        for cmd in found if isinstance(found, list | tuple) else [found]:
            main.add_command(cmd)


_register()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
