"""The report in a real browser: a fixture run's report (report_fixture.py, built through the
real report code, no model) opened in headless Chromium at 1400 px.

Fails on console errors or uncaught page errors, on horizontal overflow
(document.scrollingElement.scrollWidth > 1400), when the summary or the paper-vs-ours
columns are missing, and on any link that does not resolve to a file; follows a number to
its provenance page and that page up one step of the lineage. The full-page screenshot is
written to $RETRACE_SCREENSHOT_DIR (or the test's tmp dir) as report-1400.png.

Needs Playwright (PyPI, pinned in envs/cpu.txt) driving the system Chromium (Debian
`chromium`; Playwright's own browser download is not used, so no network is needed), or
$RETRACE_CHROMIUM pointing at a Chromium binary. Without one the test skips with the
reason, except in CI (CI=true or RETRACE_REQUIRE_BROWSER=1), where it fails: .ci/run
installs chromium. Run: python -m pytest tests/unit/test_report_browser.py
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from report_fixture import build_run

from retrace.report import build_report

WIDTH = 1400
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("RETRACE_REQUIRE_BROWSER") == "1"


def chromium_path() -> str | None:
    for name in (os.environ.get("RETRACE_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and (found := shutil.which(name)):
            return found
    return None


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -r envs/cpu.txt)"
    if chromium_path() is None:
        return "no Chromium binary (apt-get install chromium, or set RETRACE_CHROMIUM)"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = _missing()
    if reason:
        if REQUIRED:
            pytest.fail(f"the browser test must run here (CI / RETRACE_REQUIRE_BROWSER): {reason}")
        pytest.skip(f"[BROWSER] {reason}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: CI runs as root in a container, where Chromium's sandbox cannot start.
        b = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    run = build_run(root)
    out = root / "report"
    build_report(run["scores"], out, run["claims"], run["diagnostics"], run["sections"])
    return out


class Page:
    """A 1400 px page that records console errors and uncaught exceptions."""

    def __init__(self, browser):
        self.page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def open(self, path: Path) -> None:
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_load_state("load")

    def scroll_width(self) -> int:
        return self.page.evaluate("document.scrollingElement.scrollWidth")

    def links(self) -> list[str]:
        return self.page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)")


def unresolved(links: list[str]) -> list[str]:
    return [u for u in links if urlparse(u).scheme != "file" or not Path(unquote(urlparse(u).path)).is_file()]


def test_report_in_chromium(browser, report):
    page = Page(browser)
    page.open(report / "index.html")
    shots = Path(os.environ.get("RETRACE_SCREENSHOT_DIR") or report)
    shots.mkdir(parents=True, exist_ok=True)
    page.page.screenshot(path=str(shots / "report-1400.png"), full_page=True)
    assert (shots / "report-1400.png").stat().st_size > 50_000
    assert page.errors == []
    assert page.scroll_width() <= WIDTH
    summary = page.page.inner_text("#summary ~ p.counts")
    assert "supported" in summary and "contradicted" in summary and "inconclusive" in summary
    headers = page.page.eval_on_selector_all("#claims-table th", "ts => ts.map(t => t.innerText)")
    assert any(h.startswith("paper:") for h in headers) and "setting" in headers
    links = page.links()
    assert len(links) > 50 and unresolved(links) == []


def test_number_leads_up_its_lineage(browser, report):
    page = Page(browser)
    page.open(report / "index.html")
    page.page.click("#results-table tbody td.num a >> nth=0")  # the first run's n
    assert page.page.title().startswith("provenance: ")
    assert page.scroll_width() <= WIDTH and unresolved(page.links()) == []
    before = page.page.url
    page.page.click("a.up >> nth=0")
    assert page.page.url != before and page.page.title().startswith("provenance: ")
    assert page.page.locator("a.down").count() >= 1  # and back down to what read it
    assert page.errors == []
