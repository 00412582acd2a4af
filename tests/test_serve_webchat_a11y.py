"""Accessibility of the web chat, checked by axe-core 4.14 (vendored for the tests only in
``tests/vendor/axe-core/``, see its README) in a real headless Chromium: no serious or critical violation at desktop and phone width, in
the light and the dark theme, with Markdown, a tool panel waiting for approval, the open drawer
and the rename box on screen. Also saves the screenshots docs/serve.md shows (desktop and phone,
light and dark) to ``$FOUNDATION_AI_TEST_ARTIFACTS`` (else a pytest tmp dir)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import test_serve_webchat_ui as ui
from tests._webchat_ui import DESKTOP, PHONE, set_scheme
from tests.test_serve_webchat import css, send, shot, wait_for

pytestmark = ui.pytestmark
artifacts = ui.artifacts
browser = ui.browser
app_server = ui.app_server


AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"


def serious(driver: Any) -> list[str]:
    """axe-core's serious and critical violations on the page now (rule (impact): targets)."""
    driver.execute_script(AXE.read_text(encoding="utf-8"))
    results = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document).then(done, (e) => done({violations: [{id: 'axe-error ' + e, impact: 'critical', nodes: []}]}));"
    )
    assert results["passes"], "axe ran its rules"
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:5]}"
        for v in results["violations"]
        if v.get("impact") in ("serious", "critical")
    ]


def fill(driver: Any) -> None:
    """A conversation showing most of what the page can show."""
    send(driver, "markdown please")
    wait_for(lambda: css(driver, ".msg.assistant .code"), "the Markdown answer")
    send(driver, "echo this")
    wait_for(lambda: css(driver, ".tool-panel .result .ctl"), "the tool result")
    wait_for(lambda: css(driver, "#send")[0].is_enabled(), "the chat to be idle")
    send(driver, "command please")
    wait_for(lambda: css(driver, ".tool-panel.pending .will-run"), "the approval panel")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_chat_has_no_serious_or_critical_accessibility_violations(
    browser: Any, app_server: Any, artifacts: Path, size: tuple[int, int], scheme: str
) -> None:
    page = ui.open_page(browser, app_server, size)
    set_scheme(page, scheme)
    assert serious(page) == [], "the empty chat"
    fill(page)
    where = f"{'phone' if size == PHONE else 'desktop'}-{scheme}"
    page.execute_script("document.querySelector('#log').scrollTop = 0")
    shot(page, artifacts, f"chat-{where}")
    page.execute_script("const l = document.querySelector('#log'); l.scrollTop = l.scrollHeight")
    shot(page, artifacts, f"approval-{where}")
    assert serious(page) == [], "a conversation with Markdown, tools and an approval"
    ui.side_open(page)
    css(page, "#sessions li.active button.rename")[0].click()
    wait_for(lambda: css(page, "#sessions .rename-input"), "the rename box")
    if size == PHONE:
        shot(page, artifacts, f"drawer-{where}")
    assert serious(page) == [], "the chat list with the rename box"
