"""Approving and denying tool calls in the web chat, in a real headless Chromium (the harness of
``test_serve_webchat``): a call needing approval shows a panel with Approve / Deny; a click
continues the turn in the page; a reload keeps the buttons. Screenshots go to
``$FOUNDATION_AI_TEST_ARTIFACTS`` (else a pytest tmp dir)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foundation_ai.serve import ServerThread
from tests import test_serve_webchat as webchat
from tests._serve_helpers import TOOL_RUNS, serving
from tests.test_serve_approvals import gated_agent
from tests.test_serve_webchat import css, log_text, send, shot, wait_for

# the Chromium harness of test_serve_webchat: its fixtures (``page`` uses this module's
# ``app_server``) and its skip when chromium / chromium-driver are missing
pytestmark = webchat.pytestmark
artifacts = webchat.artifacts
browser = webchat.browser
page = webchat.page


@pytest.fixture(scope="module")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, str]]:
    with serving(tmp_path_factory.mktemp("webchat-approvals"), agents=[gated_agent()]) as (srv, keys):
        yield srv, keys.create("browser")[1]


def pending_panel(driver: Any) -> Any:
    return wait_for(
        lambda: css(driver, ".tool-panel.pending .approval button.approve"), "the approval buttons"
    )


def test_approving_a_tool_call_in_the_page_continues_the_turn(page: Any, artifacts: Path) -> None:
    runs = len(TOOL_RUNS)
    send(page, "please add")
    pending_panel(page)
    panel = css(page, ".tool-panel.pending")[0]
    assert "Tool: add" in panel.text and '"b": 40' in panel.text
    assert "waiting for your approval" in panel.text
    assert panel.find_elements("css selector", "button.deny")
    assert not css(page, "#send")[0].is_enabled(), "no new turn while a call waits"
    wait_for(lambda: css(page, "#sessions li.active.waiting"), "the session marked as waiting in the list")
    assert len(TOOL_RUNS) == runs, "nothing ran before the click"
    shot(page, artifacts, "approval-pending")
    panel.find_elements("css selector", "button.approve")[0].click()
    wait_for(lambda: "The sum is 42." in log_text(page), "the continued answer")
    wait_for(lambda: css(page, ".tool-panel .result")[0].text == "42", "the tool result")
    assert TOOL_RUNS[runs:] == [(2, 40)]
    assert "approved" in css(page, ".tool-panel")[0].text
    assert not css(page, ".tool-panel.pending")
    usage = wait_for(
        lambda: len(css(page, ".turn-usage")) == 2 and css(page, ".turn-usage"), "both usage lines"
    )
    # the paused turn's footer says it continued (it said "awaiting_approval" forever before)
    assert "then continued" in usage[0].text and "tokens:" in usage[1].text
    assert not any("awaiting" in u.text or "waiting" in u.text for u in usage)
    wait_for(lambda: css(page, "#send")[0].is_enabled(), "the chat to be idle again")
    wait_for(lambda: not css(page, "#sessions li.waiting"), "the waiting mark gone from the list")
    shot(page, artifacts, "approval-approved")


def test_denying_with_a_reason_shows_the_models_answer_to_it(page: Any, artifacts: Path) -> None:
    runs = len(TOOL_RUNS)
    send(page, "please add")
    pending_panel(page)
    panel = css(page, ".tool-panel.pending")[0]
    panel.find_elements("css selector", "input.reason")[0].send_keys("not today")
    panel.find_elements("css selector", "button.deny")[0].click()
    wait_for(lambda: "I could not add:" in log_text(page), "the answer to the denial")
    result = css(page, ".tool-panel .result")[0]
    assert "error:" in result.text and "not today" in result.text
    assert "error" in (result.get_attribute("class") or "")
    assert "denied" in css(page, ".tool-panel")[0].text
    assert "not today" in css(page, ".msg.assistant")[-1].text
    assert len(TOOL_RUNS) == runs, "a denied call never runs"
    shot(page, artifacts, "approval-denied")


def test_a_reload_keeps_the_pending_call_and_its_buttons(page: Any, artifacts: Path) -> None:
    send(page, "please add")
    pending_panel(page)
    page.refresh()
    wait_for(lambda: "please add" in log_text(page), "the resumed conversation")
    pending_panel(page)
    assert not css(page, "#send")[0].is_enabled()
    shot(page, artifacts, "approval-after-reload")
    css(page, ".tool-panel.pending button.approve")[0].click()
    wait_for(lambda: "The sum is 42." in log_text(page), "the continued answer after the reload")
    wait_for(lambda: css(page, "#send")[0].is_enabled(), "the chat to be idle again")


def test_stop_ends_a_turn_waiting_for_approval_and_runs_nothing(page: Any, artifacts: Path) -> None:
    runs = len(TOOL_RUNS)
    send(page, "please add")
    pending_panel(page)
    stop = css(page, "#stop")[0]
    assert stop.is_enabled(), "Stop is offered while a call waits"
    stop.click()
    wait_for(lambda: not css(page, ".tool-panel.pending"), "the approval buttons gone")
    panel = css(page, ".tool-panel")[0]
    wait_for(lambda: "aborted" in css(page, ".tool-panel .result")[0].text, "the call's aborted result")
    assert "aborted" in panel.text
    usage = wait_for(
        lambda: len(css(page, ".turn-usage")) == 2 and css(page, ".turn-usage"), "both usage lines"
    )
    assert "aborted" in usage[1].text
    wait_for(lambda: css(page, "#send")[0].is_enabled(), "the chat to be idle again")
    assert not css(page, "#stop")[0].is_enabled()
    assert len(TOOL_RUNS) == runs, "the waiting call never ran"
    shot(page, artifacts, "approval-stopped")
