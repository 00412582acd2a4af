"""The approval panel in a real headless Chromium, at desktop and phone width: it shows the
command that will run line by line with its length, controls escaped exactly as the CLI's
approval question shows them (the Trojan Source ``true ls -la # ; touch PWNED ; :`` case with
U+202E / U+2066), and after a decision the turn's footer no longer says it waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foundation_ai._cli.approval import shell_question
from tests import test_serve_webchat_ui as ui
from tests._webchat_ui import BIDI_COMMAND, COMMANDS_RUN, MULTILINE_COMMAND
from tests.test_serve_webchat import css, log_text, send, shot, wait_for

pytestmark = ui.pytestmark
artifacts = ui.artifacts
browser = ui.browser
app_server = ui.app_server
page = ui.page


def cli_rows(command: str) -> list[str]:
    """The rows of the CLI's approval question for ``command``, without the line numbers."""
    return [row.split(" │ ", 1)[1] for row in shell_question(command).split("\n")[1:-1]]


def pending(driver: Any) -> Any:
    return wait_for(lambda: css(driver, ".tool-panel.pending .will-run"), "the approval panel")[0]


def footers(driver: Any) -> list[str]:
    return [f.text for f in css(driver, ".turn-usage")]


def test_the_approval_panel_shows_the_command_that_will_run_line_by_line_with_its_length(
    page: Any, artifacts: Path
) -> None:
    runs = len(COMMANDS_RUN)
    send(page, "command please")
    box = pending(page)
    head = box.find_elements("css selector", ".will-run-head")[0].text
    assert head == f"command (1 line, {len(BIDI_COMMAND)} characters; 2 control characters shown escaped):"
    rows = box.find_elements("css selector", "ol.lines li")
    assert (
        [r.text for r in rows] == cli_rows(BIDI_COMMAND) == ["true ls -la # \\u202e ; touch PWNED ; :\\u2066"]
    )
    assert rows[0].get_attribute("value") == "1"
    assert [s.text for s in rows[0].find_elements("css selector", ".ctl")] == ["\\u202e", "\\u2066"]
    assert ui.raw_controls(page, ".tool-panel") == [], "no bidi character reaches the panel as is"
    assert len(COMMANDS_RUN) == runs, "nothing runs before the decision"
    shot(page, artifacts, ui.name(page, "approval-bidi"))
    css(page, ".tool-panel.pending button.approve")[0].click()
    wait_for(lambda: "Tool said: ran" in log_text(page), "the continued answer")
    assert COMMANDS_RUN[runs:] == [BIDI_COMMAND], "what ran is what was shown"


def test_a_multiline_command_shows_each_line_numbered_and_empty_runs_shortened(page: Any) -> None:
    send(page, "multiline command please")
    box = pending(page)
    head = box.find_elements("css selector", ".will-run-head")[0].text
    assert head == "command (6 lines, 18 characters):"
    rows = box.find_elements("css selector", "ol.lines li")
    assert [r.text for r in rows] == cli_rows(MULTILINE_COMMAND) == ["ls", "⟨4 empty lines⟩", "touch pwned"]
    assert rows[0].get_attribute("value") == "1" and rows[2].get_attribute("value") == "6"
    css(page, ".tool-panel.pending button.deny")[0].click()
    wait_for(lambda: "Tool said:" in log_text(page), "the answer to the denial")


def test_after_approve_the_footer_stops_saying_the_turn_awaits_approval(page: Any, artifacts: Path) -> None:
    send(page, "command please")
    pending(page)
    wait_for(lambda: footers(page), "the paused turn's footer")
    assert "waiting for approval" in footers(page)[0]
    css(page, ".tool-panel.pending button.approve")[0].click()
    wait_for(lambda: len(footers(page)) == 2, "the continuation's footer")
    lines = footers(page)
    assert not any("awaiting" in f or "waiting" in f for f in lines), lines
    assert "then continued" in lines[0] and "tokens:" in lines[1]
    wait_for(lambda: css(page, "#send")[0].is_enabled(), "the chat to be idle")
    shot(page, artifacts, ui.name(page, "approval-approved"))
    page.refresh()  # the stored records say the same
    wait_for(lambda: len(footers(page)) == 2, "the resumed footers")
    lines = footers(page)
    assert not any("awaiting" in f or "waiting" in f for f in lines), lines
    assert "then continued" in lines[0]


def test_after_a_reload_a_waiting_call_still_says_it_waits(page: Any) -> None:
    send(page, "command please")
    pending(page)
    page.refresh()
    pending(page)
    wait_for(lambda: footers(page), "the footer")
    assert "waiting for approval" in footers(page)[0]
    css(page, ".tool-panel.pending button.deny")[0].click()
    wait_for(lambda: len(footers(page)) == 2, "the continuation's footer")
    assert "waiting" not in footers(page)[0]
