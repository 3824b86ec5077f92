"""The report as one self-contained HTML page: plotly.js inline once, every figure, every table.

The layout is the Jinja2 template ``templates/report.html.j2`` (autoescaping on). The page needs no
network (no CDN, no fonts, no MathJax), so it can be attached to a ticket and opened anywhere. Every
string that comes from a trace (kernel and operator names, file names, GPU names) is untrusted: the
template escapes text and attributes, tables are rendered with ``DataFrame.to_html(escape=True)``,
and figure data goes through plotly's JSON encoder, which writes ``<``, ``>`` and ``/`` as ``\\u``
escapes inside the figure scripts.
"""

from __future__ import annotations

import datetime as dt
from functools import cache

import jinja2
import pandas as pd
from markupsafe import Markup, escape

from analysis.reports.content import ReportContent

# Tables longer than this are cut on the page (the CSV beside it has every row).
MAX_TABLE_ROWS = 200

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1250px; padding: 0 24px 48px; color: #222; }
h1 { margin-bottom: 4px; } h2 { margin-top: 40px; border-bottom: 1px solid #ddd; }
.meta { color: #555; margin-top: 0; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 10px 16px; min-width: 140px; }
.card .value { font-size: 1.5em; font-weight: 600; } .card .label { color: #555; font-size: .85em; }
.how { color: #444; max-width: 950px; } .error { color: #a00; font-weight: 600; }
table.dataframe { border-collapse: collapse; font-size: .85em; margin: 8px 0; display: block;
                  max-width: 100%; overflow-x: auto; }
table.dataframe th, table.dataframe td { border: 1px solid #ddd; padding: 3px 8px; text-align: right;
                                         max-width: 36em; overflow-wrap: break-word; }
table.dataframe th { background: #f4f4f4; }
details { margin: 8px 0 16px; } summary { cursor: pointer; color: #0072B2; }
nav a { margin-right: 14px; } .note { color: #666; font-size: .85em; }
"""


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("analysis.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def table_html(df: pd.DataFrame, name: str, csv_dir: str = "tables") -> Markup:
    """A table (first ``MAX_TABLE_ROWS`` rows, values escaped) with a link to its CSV."""
    shown = df.head(MAX_TABLE_ROWS)
    note = ""
    if len(df) > len(shown):
        note = f'<p class="note">First {len(shown)} of {len(df):,} rows.</p>'
    link = f'<a href="{escape(csv_dir)}/{escape(name)}.csv">{escape(name)}.csv</a>'
    if type(df)._repr_html_ is not pd.DataFrame._repr_html_:
        body = df._repr_html_()  # a table with its own (escaping) display, e.g. the findings
    else:
        body = shown.to_html(escape=True, index=False, na_rep="–",
                             float_format=lambda v: f"{v:,.2f}", border=0)
    return Markup(f'{note}{body}<p class="note">All rows: {link}</p>')


def figure_html(name: str, fig) -> Markup:
    """A figure's div and script, without plotly.js (the page inlines it once)."""
    # A fixed div id keeps the page byte-identical for identical input (no random UUIDs).
    return Markup(fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=f"fig-{escape(name)}",
        config={"displaylogo": False, "responsive": True},
        default_height="560px",
    ))


def render_html(
    content: ReportContent, plotly_js: str, csv_dir: str = "tables",
    title: str = "Trace analysis report",
) -> str:
    """The whole page as a string; ``plotly_js`` is the plotly.js bundle to inline (once)."""
    # "</script" cannot occur inside plotly.js, but guard the one raw insertion anyway.
    plotly_js = Markup(plotly_js.replace("</script", "<\\/script"))
    return _environment().get_template("report.html.j2").render(
        title=title,
        content=content,
        css=Markup(_CSS),
        plotly_js=plotly_js,
        csv_dir=csv_dir,
        generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        table=lambda df, name: table_html(df, name, csv_dir),
        figure=figure_html,
    )
