"""The report rendered in a real headless browser (Debian's chromium): figures and tables present, the
sorting script works, and the page logs nothing to the console (no script errors)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autosched.report.page import write_report

from .conftest import SHIPPED

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)"
)
pytest.importorskip("matplotlib", reason="figures need the report extra (matplotlib)")

# After the page's own script: click a header twice (descending) and write the sorted column out.
_CLICK_SORT = """<script>
var t = document.getElementById("task-table"), th = t.tHead.rows[0].cells[4];
th.click(); th.click();
var out = document.createElement("pre"); out.id = "sorted";
out.textContent = Array.prototype.map.call(t.tBodies[0].rows, function (r) {
  return r.cells[4].getAttribute("data-sort"); }).join(",");
document.body.appendChild(out);
</script></body>"""


def render(page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """(DOM after scripts ran, console lines) of ``page`` in headless chromium."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             f"--user-data-dir={tmp_path / 'chr'}", "--enable-logging=stderr", "--v=0"]  # fmt: skip
    r = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, [line for line in r.stderr.splitlines() if ":CONSOLE" in line]


def test_console_errors_are_caught(tmp_path):
    """The check below can fail: a page with a script error shows up in the console lines."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>no_such_function();</script></body></html>")
    _, console = render(page, tmp_path)
    assert any("no_such_function" in line for line in console)


def test_report_renders_with_figures_tables_and_no_console_errors(two_chip_logs, tmp_path):
    logs = [*SHIPPED, *two_chip_logs]
    page = tmp_path / "report.html"
    write_report(logs, page)
    page.write_text(page.read_text().replace("</body>", _CLICK_SORT, 1))
    dom, console = render(page, tmp_path)
    assert console == [], console
    assert dom.count("<svg") >= 3  # tuning curves of the fake logs, a roofline per chip
    for ident in ("logs", "task-table", "cross-chip-table"):
        assert f'id="{ident}"' in dom
    n_tasks = len(re.findall(r"<tr>", dom.split('id="task-table"')[1].split("</table>")[0])) - 1
    assert n_tasks >= 2
    sorted_col = re.search(r'<pre id="sorted">([^<]*)</pre>', dom).group(1).split(",")
    values = [float(v) for v in sorted_col]
    assert len(values) == n_tasks and values == sorted(values, reverse=True)
