"""Small HTML building blocks for a self-contained page: escaped text, sortable tables, folded code.

Everything a page needs is inline (style, a short sorting script, SVG figures, the data as JSON), so
the file opens from disk with no server and no network.

Example::

    body = section("Tasks", table(["task", "GFLOP/s"], [["matmul", Cell("41.2", 41.2)]]))
    html = page("autosched report", body, data={"tasks": 1})
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; padding: 0 1em;
       color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: .6em 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; cursor: pointer; user-select: none; }
th.sorted-asc::after { content: " \\25B2"; } th.sorted-desc::after { content: " \\25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f8f8f8; border: 1px solid #e4e4e4; padding: .6em; overflow: auto; max-height: 40em;
      font-size: 12px; }
details { margin: .3em 0; } summary { cursor: pointer; }
.note { background: #fff4e5; border-left: 4px solid #f0a030; padding: .4em .8em; margin: .4em 0; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; } .figures svg { max-width: 100%; height: auto; }
.muted { color: #777; }
"""

# Click a header to sort by that column; cells carry their sort value in data-sort (numbers or text).
_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var asc = !th.classList.contains("sorted-asc");
      table.querySelectorAll("th").forEach(function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
      th.classList.add(asc ? "sorted-asc" : "sorted-desc");
      function key(row) {
        var v = row.cells[col].getAttribute("data-sort"), n = parseFloat(v);
        return isNaN(n) ? v : n;
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b), c = (typeof x === typeof y) ? (x < y ? -1 : x > y ? 1 : 0)
                                                               : (typeof x === "number" ? -1 : 1);
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


@dataclass(frozen=True)
class Cell:
    """A table cell: the text shown and the value it sorts by (a number sorts numerically)."""

    text: str
    sort: float | str | None = None


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[Cell | str]], css_id: str = "") -> str:
    """A sortable table; a header click sorts by that column's ``Cell.sort`` values."""
    ident = f' id="{esc(css_id)}"' if css_id else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for c in row:
            cell = c if isinstance(c, Cell) else Cell(str(c))
            sort = cell.text if cell.sort is None else cell.sort
            num = ' class="num"' if isinstance(cell.sort, (int, float)) else ""
            cells.append(f'<td{num} data-sort="{esc(sort)}">{esc(cell.text)}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (
        f'<table class="sortable"{ident}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def folded(summary: str, text: str) -> str:
    """Text in a ``<pre>`` folded under a ``<details>`` summary."""
    return f"<details><summary>{esc(summary)}</summary><pre>{esc(text)}</pre></details>"


def note(text: str) -> str:
    return f'<div class="note">{esc(text)}</div>'


def section(title: str, *parts: str, css_id: str = "") -> str:
    ident = f' id="{esc(css_id)}"' if css_id else ""
    return f"<section{ident}><h2>{esc(title)}</h2>{''.join(parts)}</section>"


def page(title: str, body: str, data: Any = None) -> str:
    """The whole document; ``data`` is embedded as JSON (``<script type="application/json">``)."""
    embedded = ""
    if data is not None:
        text = json.dumps(data, sort_keys=True, default=str).replace("</", "<\\/")  # cannot end the script
        embedded = f'<script type="application/json" id="autosched-data">{text}</script>'
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{esc(title)}</h1>{body}{embedded}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
