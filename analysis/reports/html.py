"""The report as one self-contained HTML page: plotly.js inline once, every figure, every table.

The page needs no network (no CDN, no fonts, no MathJax), so it can be attached to a ticket and
opened anywhere. Every string that comes from a trace (kernel and operator names, file names,
GPU names) is untrusted: text and attributes go through ``html.escape``, tables through
``DataFrame.to_html(escape=True)``, and figure data through plotly's JSON encoder, which writes
``<``, ``>`` and ``/`` as ``\\u`` escapes inside the figure scripts.
"""

from __future__ import annotations

import datetime as dt
from html import escape

import pandas as pd

from analysis.reports.content import ReportContent, Section

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
table.dataframe { border-collapse: collapse; font-size: .85em; margin: 8px 0; }
table.dataframe th, table.dataframe td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
table.dataframe th { background: #f4f4f4; }
details { margin: 8px 0 16px; } summary { cursor: pointer; color: #0072B2; }
nav a { margin-right: 14px; } .note { color: #666; font-size: .85em; }
"""


def _table(df: pd.DataFrame, name: str, csv_dir: str) -> str:
    shown = df.head(MAX_TABLE_ROWS)
    note = ""
    if len(df) > len(shown):
        note = f'<p class="note">First {len(shown)} of {len(df):,} rows.</p>'
    link = f'<a href="{escape(csv_dir)}/{escape(name)}.csv">{escape(name)}.csv</a>'
    body = shown.to_html(escape=True, index=False, na_rep="–", float_format=lambda v: f"{v:,.2f}",
                         border=0)
    return f'{note}{body}<p class="note">All rows: {link}</p>'


def _figure(name: str, fig) -> str:
    # A fixed div id keeps the page byte-identical for identical input (no random UUIDs).
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=f"fig-{name}",
        config={"displaylogo": False, "responsive": True},
        default_height="560px",
    )


def _section(s: Section, csv_dir: str) -> str:
    parts = [f'<section id="{escape(s.key)}"><h2>{escape(s.title)}</h2>',
             f'<p class="how">{escape(s.how_to_read)}</p>']
    if s.error:
        parts.append(f'<p class="error">Not available for these traces: {escape(s.error)}</p>')
    for name, fig in s.figures.items():
        parts.append(_figure(name, fig))
    for name, df in s.tables.items():
        parts.append(f"<details><summary>Table: {escape(name)}</summary>{_table(df, name, csv_dir)}"
                     "</details>")
    for name in s.csv_only:
        parts.append(f'<p class="note">Every row: <a href="{escape(csv_dir)}/{escape(name)}.csv">'
                     f"{escape(name)}.csv</a></p>")
    parts.append("</section>")
    return "\n".join(parts)


def _cards(content: ReportContent) -> str:
    """The key numbers at the top of the page (taken from the headline table, not recomputed)."""
    h = content.headline
    meta = content.metadata
    cards = [
        ("ranks", str(len(content.ranks))),
        ("GPU", ", ".join(sorted({g for g in meta["gpu"] if g and g != "-"})) or "–"),
        ("profiler steps", str(content.steps["step"].nunique()) if len(content.steps) else "–"),
    ]
    if "idle_%" in h and h["idle_%"].notna().any():
        cards.append(("mean GPU idle", f"{h['idle_%'].mean():.1f} %"))
        worst = h.loc[h["idle_%"].idxmax()]
        cards.append(("most idle rank", f"{int(worst['rank'])} ({worst['idle_%']:.1f} %)"))
    if "comm_overlap_%" in h and h["comm_overlap_%"].notna().any():
        cards.append(("mean comm/comp overlap", f"{h['comm_overlap_%'].mean():.1f} %"))
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="value">{escape(v)}</div><div class="label">{escape(k)}</div></div>'
        for k, v in cards
    ) + "</div>"


def render_html(content: ReportContent, plotly_js: str, csv_dir: str = "tables") -> str:
    """The whole page as a string; ``plotly_js`` is the plotly.js bundle to inline (once)."""
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nav = " ".join(f'<a href="#{escape(s.key)}">{escape(s.title)}</a>' for s in content.sections)
    ranks = ", ".join(str(r) for r in content.ranks)
    # "</script" cannot occur inside plotly.js, but guard the one raw insertion anyway.
    plotly_js = plotly_js.replace("</script", "<\\/script")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Trace analysis report: {escape(content.source)}</title>",
        f"<style>{_CSS}</style>",
        f'<script type="text/javascript">{plotly_js}</script>',
        "</head><body>",
        "<h1>Trace analysis report</h1>",
        f'<p class="meta">{escape(content.source)} · ranks {escape(ranks)} · kernel patterns '
        f"{escape(content.kernel_patterns)} · generated {escape(generated)}</p>",
        f"<nav>{nav}</nav>",
        _cards(content),
        "<h2>Key numbers per rank</h2>",
        '<p class="how">GPU time shares (%) of each rank\'s kernel time, its communication overlap, '
        "and its kernel time (first kernel start to last kernel end, ms).</p>",
        _table(content.headline, "headline", csv_dir),
        "<h2>Traces</h2>",
        _table(content.metadata, "trace_metadata", csv_dir),
        "<details><summary>Profiler steps (µs, the trace's own clock)</summary>",
        _table(content.steps, "profiler_steps", csv_dir),
        "</details>",
        *(_section(s, csv_dir) for s in content.sections),
        "</body></html>",
    ])
