"""The report as one self-contained HTML page: plotly.js inline once, every figure, every table.

The layout is the Jinja2 template ``templates/report.html.j2`` (autoescaping on). The page needs no
network (no CDN, no fonts, no MathJax), so it can be attached to a ticket and opened anywhere. Every
string that comes from a trace (kernel and operator names, file names, GPU names) is untrusted: the
template escapes text and attributes, tables are rendered by ``data_table`` (every cell escaped),
and figure data goes through plotly's JSON encoder, which writes ``<``, ``>`` and ``/`` as ``\\u``
escapes inside the figure scripts.
"""

from __future__ import annotations

import datetime as dt
import re
from functools import cache

import jinja2
import numpy as np
import pandas as pd
from markupsafe import Markup, escape

from analysis.reports.content import ReportContent

# Tables longer than this are cut on the page (the CSV beside it has every row).
MAX_TABLE_ROWS = 200
# Text cells up to this many characters never wrap (a GPU name stays on one line).
NOWRAP_CHARS = 28
# Numbers that read as a date: epoch µs from 1973 on (a trace clock starting at 0 stays a number).
_EPOCH_US_FLOOR = 1e14
# Identifiers, printed without thousands separators.
_ID_COLUMNS = {"rank", "step", "instance", "stream", "pid", "tid", "correlation", "world_size",
               "device", "iteration", "index"}
_TIME_NAME = re.compile(r"(?i)(^|_)(start|end|ts|begin|first|last)(_us|\(us\))?$")
_DASH = "–"  # an empty cell

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1250px; padding: 0 24px 48px; color: #222; }
h1 { margin: 12px 0 2px; font-size: 1.6em; } h2 { margin-top: 36px; border-bottom: 1px solid #ddd; }
.meta { color: #444; margin: 0 0 6px; } .meta strong { color: #222; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 6px 14px; min-width: 110px; }
.card .value { font-size: 1.3em; font-weight: 600; white-space: nowrap; }
.card .label { color: #555; font-size: .8em; }
.how { color: #444; max-width: 950px; } .error { color: #a00; font-weight: 600; }
.table-wrap { max-width: 100%; max-height: 70vh; overflow: auto; margin: 8px 0;
              border: 1px solid #ddd; }
table.data { border-collapse: separate; border-spacing: 0; font-size: .85em; }
table.data th, table.data td { border-right: 1px solid #e4e4e4; border-bottom: 1px solid #e4e4e4;
                               padding: 3px 8px; vertical-align: top; }
table.data th { background: #f4f4f4; position: sticky; top: 0; z-index: 1; text-align: left; }
table.data th.num { text-align: right; }
table.data td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
table.data td.txt { text-align: left; max-width: 40em; overflow-wrap: anywhere; }
table.data td.txt:not(.nw) { min-width: 12em; }
table.data td.nw { white-space: nowrap; }
.sev-error { color: #b00020; font-weight: 600; } .sev-warning { color: #b35900; font-weight: 600; }
.sev-info { color: #1f5fa8; }
ol.findings { padding-left: 1.4em; margin: 6px 0; } ol.findings li { margin-bottom: 4px; }
details.fix { margin: 0 0 4px; font-size: .85em; } details.fix summary { color: #567; }
details { margin: 8px 0 16px; } summary { cursor: pointer; color: #0072B2; }
nav { font-size: .9em; margin: 4px 0 8px; } nav a { margin-right: 12px; white-space: nowrap; }
.note { color: #666; font-size: .85em; }
"""


def _is_id(name: str) -> bool:
    return str(name).lower() in _ID_COLUMNS or str(name).lower().endswith("_id")


def _numeric(values: pd.Series) -> bool:
    """Every non-empty value is a number (an object column of ints and None counts)."""
    if pd.api.types.is_bool_dtype(values):
        return False
    if pd.api.types.is_numeric_dtype(values):
        return True
    present = values.dropna()
    return len(present) > 0 and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        for v in present)


def _epoch_us(name: str, values: pd.Series) -> bool:
    """A column of absolute timestamps in µs (``start(us)``, ``ts``): shown as UTC time."""
    present = pd.to_numeric(values, errors="coerce").dropna()
    return bool(_TIME_NAME.search(str(name))) and len(present) > 0 and present.min() >= _EPOCH_US_FLOOR


def _utc(us: float) -> str:
    t = dt.datetime.fromtimestamp(us / 1e6, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def _whole(values: pd.Series) -> bool:
    """Every value of the column is a whole number: printed without decimals."""
    present = pd.to_numeric(values, errors="coerce").dropna()
    return bool(((present % 1) == 0).all())


def _number(v, kind: str) -> str:
    if kind == "id":
        return f"{int(v)}" if float(v).is_integer() else f"{v}"
    return f"{int(v):,}" if kind == "int" else f"{v:,.2f}"


def _empty(v) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):  # lists, arrays
        return False


def _text(v) -> str:
    if isinstance(v, (list, tuple, set)):
        return ", ".join(str(x) for x in v)
    return str(v)


def data_table(df: pd.DataFrame) -> Markup:
    """``df`` as an HTML table: text left-aligned and wrapped, numbers right-aligned with
    thousands separators, absolute µs timestamps as UTC time, empty cells as "–", the header kept
    in view while the table scrolls (inside ``.table-wrap``). Every value is escaped."""
    head, columns = [], []
    for name in df.columns:
        values = df[name]
        if _numeric(values):
            kind = ("time" if _epoch_us(name, values) else "id" if _is_id(name)
                    else "int" if _whole(values) else "num")
        else:
            longest = max((len(_text(v)) for v in values if not _empty(v)), default=0)
            kind = "nw" if longest <= NOWRAP_CHARS else "txt"
        label = re.sub(r"\s*\(us\)$|_us$", "", str(name)) + " (UTC)" if kind == "time" else str(name)
        # headers may break after "_" (queue_empty_idle_pctg): numbers never wrap, names can
        wrapped = Markup("_<wbr>").join(escape(label).split("_"))
        head.append(f'<th class="{"txt" if kind in ("txt", "nw") else "num"}">{wrapped}</th>')
        columns.append((name, kind))
    rows = []
    for record in df.itertuples(index=False, name=None):
        cells = []
        for (name, kind), v in zip(columns, record, strict=True):
            if _empty(v):
                text, css = _DASH, "txt" if kind in ("txt", "nw") else "num"
            elif kind == "time":
                text, css = _utc(float(v)), "num"
            elif kind in ("num", "int", "id"):
                text, css = _number(v, kind), "num"
            else:
                text = _text(v)
                css = f"txt nw sev-{text}" if name == "severity" else "txt nw" if kind == "nw" else "txt"
            shown = escape(text)
            if css == "txt" and " " not in text and text.count("/") > 1:  # a path: break after "/"
                shown = Markup("/<wbr>").join(shown.split("/"))
            cells.append(f'<td class="{css}">{shown}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return Markup(f'<div class="table-wrap"><table class="data"><thead><tr>{"".join(head)}'
                  f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


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
        # a table with its own (escaping) display, e.g. the findings
        body = f'<div class="findings">{df._repr_html_()}</div>'
    elif not len(df):  # a header alone read as a table that failed to show
        return Markup('<p class="note">No rows: these traces hold nothing this table lists, '
                      f"in the window its analysis reads (its columns: {link}).</p>")
    else:
        body = data_table(shown)
    return Markup(f'{note}{body}<p class="note">All rows: {link}</p>')


def health_html(df: pd.DataFrame, name: str, csv_dir: str = "tables") -> Markup:
    """The trace-health findings grouped across ranks (``analysis.reports.health``): errors and
    warnings shown, info rows folded; the CSV keeps one row per rank."""
    from analysis.reports.health import grouped

    rows = grouped(df)
    link = f'<p class="note">One row per rank: <a href="{escape(csv_dir)}/{escape(name)}.csv">{escape(name)}.csv</a></p>'
    info = rows[rows["severity"] == "info"]
    serious = rows[rows["severity"] != "info"]
    parts = [data_table(serious) if len(serious) else
             Markup('<p>No error or warning: the traces look sound.</p>')]
    if len(info):
        parts.append(Markup(f"<details><summary>{len(info)} info finding"
                            f"{'' if len(info) == 1 else 's'} (worth knowing)</summary>")
                     + data_table(info) + Markup("</details>"))
    return Markup("").join(parts) + Markup(link)


def findings_html(df: pd.DataFrame, name: str, csv_dir: str = "tables") -> Markup:
    """The findings, most severe first, one short item each (title and number); the evidence and
    the usual fix fold under it, so the key numbers after them stay on the first screen."""
    items = []
    for r in df.itertuples():
        items.append(
            f'<li><span class="sev-{escape(r.severity)}">{escape(r.severity)}</span> '
            f"<strong>{escape(r.title)}</strong>: {escape(r.detail)}"
            f'<details class="fix"><summary>evidence and usual fix</summary>'
            f'<span class="note">Evidence: {escape(r.evidence)}</span><br>'
            f"Usually fixes it: {escape(r.suggestion)}</details></li>")
    if not items:
        items.append("<li>No finding: nothing the rules check for is wrong in these traces.</li>")
    not_run = df.attrs.get("not_run") or {}
    skipped = "".join(f"<li>{escape(k)}: {escape(v)}</li>" for k, v in not_run.items())
    folded = (f"<details><summary>Checks that could not run ({len(not_run)})</summary>"
              f"<ul>{skipped}</ul></details>") if not_run else ""
    link = f'<a href="{escape(csv_dir)}/{escape(name)}.csv">{escape(name)}.csv</a>'
    return Markup(f'<ol class="findings">{"".join(items)}</ol>{folded}'
                  f'<p class="note">As a table: {link}</p>')


# Cards the identity line already shows.
_IDENTITY_CARDS = {"ranks", "GPU"}


def _health_cards(sections) -> list[tuple[str, str]]:
    """One card counting the trace-health findings (grouped across ranks) that are not info."""
    from analysis.reports.health import grouped

    for s in sections:
        for df in s.tables.values():
            rows = grouped(df)
            counts = rows["severity"].value_counts()
            parts = [f"{counts[k]} {k}{'s' if counts[k] > 1 else ''}" for k in ("error", "warning")
                     if counts.get(k, 0)]
            return [("trace health (below)", ", ".join(parts) or "sound")]
    return []


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
    first = [s for s in content.lead if s.key != "trace_health"]
    health = [s for s in content.lead if s.key == "trace_health"]
    return _environment().get_template("report.html.j2").render(
        title=title,
        content=content,
        css=Markup(_CSS),
        plotly_js=plotly_js,
        csv_dir=csv_dir,
        generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        table=lambda df, name: table_html(df, name, csv_dir),
        health=lambda df, name: health_html(df, name, csv_dir),
        findings=lambda df, name: findings_html(df, name, csv_dir),
        first=first,
        health_sections=health,
        cards=[(k, v) for k, v in content.key_numbers if k not in _IDENTITY_CARDS]
        + _health_cards(health),
        figure=figure_html,
    )
