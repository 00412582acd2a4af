"""The web chat of ``foundation-ai serve`` in a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium): type a prompt, watch the text stream in, a tool panel,
folded thinking, stop a turn, reload and resume; model HTML is shown as text and never runs.
Screenshots go to ``$FOUNDATION_AI_TEST_ARTIFACTS`` (else a pytest tmp dir)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from foundation_ai.serve import ServerThread
from tests._serve_helpers import XSS, serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver (.ci/run installs them)"
)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("FOUNDATION_AI_TEST_ARTIFACTS")
    path = Path(env) if env else tmp_path_factory.mktemp("webchat-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, str]]:
    with serving(tmp_path_factory.mktemp("webchat")) as (srv, keys):
        yield srv, keys.create("browser")[1]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM  # type: ignore[assignment]
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1200,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = cond()
        except Exception:  # element not there yet, stale after a re-render
            value = None
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def css(driver: Any, sel: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, sel)  # type: ignore[no-any-return]


def log_text(driver: Any) -> str:
    return str(driver.execute_script("return document.querySelector('#log').textContent"))


@pytest.fixture
def page(browser: Any, app_server: tuple[ServerThread, str]) -> Any:
    srv, key = app_server
    browser.get(srv.url + "/")
    ready = wait_for(
        lambda: (
            ("key" if "API key" in css(browser, "#status")[0].text else None) or css(browser, "#agent option")
        ),
        "the page to load or ask for a key",
    )
    if ready == "key":  # the first visit: the page asks for a key
        css(browser, "#key")[0].send_keys(key)
        css(browser, "#save-key")[0].click()
    wait_for(lambda: css(browser, "body[data-ready] #agent option"), "the agent list")
    css(browser, "#new")[0].click()
    wait_for(lambda: not css(browser, "#log > *"), "an empty chat")
    return browser


def send(driver: Any, text: str) -> None:
    from selenium.webdriver.common.keys import Keys

    wait_for(lambda: css(driver, "#send")[0].is_enabled(), "the chat to be idle")
    box = css(driver, "#prompt")[0]
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def shot(driver: Any, artifacts: Path, name: str) -> None:
    path = artifacts / f"{name}.png"
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 1000


def test_a_typed_prompt_streams_text_and_shows_a_tool_panel(page: Any, artifacts: Path) -> None:
    assert css(page, "#keybar.hidden"), "the key was accepted"
    send(page, "count for me")
    seen = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = log_text(page)
        if not seen or seen[-1] != text:
            seen.append(text)
        if "two, done." in text and css(page, ".turn-usage"):
            break
        time.sleep(0.05)
    partial = [t for t in seen if "Counting:" in t and "two, done." not in t]
    assert partial, f"text appeared piece by piece, saw {seen}"
    assert "tokens:" in css(page, ".turn-usage")[0].text
    send(page, "please add")
    wait_for(
        lambda: css(page, ".tool-panel .result") and css(page, ".tool-panel .result")[0].text == "42",
        "the tool result",
    )
    wait_for(lambda: "The sum is 42." in log_text(page), "the answer")
    panel = css(page, ".tool-panel")[0]
    assert "Tool: add" in panel.text and '"a": 2' in panel.text
    assert len(css(page, ".turn-usage")) == 2, "cost and tokens per turn"
    shot(page, artifacts, "tool-panel")


def test_thinking_is_folded(page: Any, artifacts: Path) -> None:
    send(page, "think about it")
    wait_for(lambda: "Thought it through." in log_text(page), "the answer")
    folded = css(page, "details.thinking")
    assert folded and folded[0].get_attribute("open") is None
    assert not folded[0].find_elements("css selector", "pre")[0].is_displayed()
    folded[0].find_elements("css selector", "summary")[0].click()
    wait_for(lambda: folded[0].find_elements("css selector", "pre")[0].is_displayed(), "unfolded thinking")
    assert "Pondering the question." in folded[0].text
    shot(page, artifacts, "thinking")


def test_stop_button_aborts_the_running_turn(page: Any, artifacts: Path) -> None:
    send(page, "slow please")
    wait_for(lambda: "Starting a long answer" in log_text(page), "the first words")
    stop = css(page, "#stop")[0]
    assert stop.is_enabled()
    stop.click()
    usage = wait_for(lambda: css(page, ".turn-usage"), "the end of the turn")
    assert "aborted" in usage[0].text
    assert "never ends" not in log_text(page)
    wait_for(lambda: not css(page, "#stop")[0].is_enabled(), "the stop button to disable")
    shot(page, artifacts, "stopped")


def test_reload_resumes_the_session(page: Any, artifacts: Path) -> None:
    send(page, "my favourite colour is teal")
    wait_for(lambda: "Hello there, friend." in log_text(page), "the answer")
    page.refresh()
    wait_for(lambda: "my favourite colour is teal" in log_text(page), "the resumed conversation")
    assert "Hello there, friend." in log_text(page)
    wait_for(lambda: css(page, "#sessions li.active"), "the session selected in the list")
    send(page, "recall")
    wait_for(lambda: "I remember:" in log_text(page), "an answer using the history")
    assert wait_for(
        lambda: "my favourite colour is teal" in css(page, ".msg.assistant")[-1].text, "the recalled history"
    )
    # an older session from the list (the list re-renders: retry on stale elements)
    wait_for(lambda: css(page, "#sessions li")[-1].click() or True, "a click on the oldest session")
    wait_for(lambda: "my favourite colour" not in log_text(page) and log_text(page), "the other session")
    shot(page, artifacts, "resumed")


def test_model_html_is_shown_as_text_and_never_runs(page: Any, artifacts: Path) -> None:
    page.execute_script("window.__pwned = undefined;")
    send(page, "xss please")
    wait_for(lambda: "onerror" in log_text(page), "the answer")
    time.sleep(0.5)  # give an injected <img onerror> a chance to fire if it existed
    assert page.execute_script("return window.__pwned") is None
    bubble = css(page, ".msg.assistant")[-1]
    assert "<script>window.__pwned = 1</script>" in bubble.text
    assert not bubble.find_elements("css selector", "script, img, iframe, object")
    assert bubble.find_elements("css selector", "strong")[0].text == "bold"
    assert bubble.find_elements("css selector", "code")[0].text == "code"
    assert XSS.split("<img")[0] in bubble.text
    page.refresh()  # history is rendered the same way
    wait_for(lambda: "onerror" in log_text(page), "the resumed answer")
    time.sleep(0.5)
    assert page.execute_script("return window.__pwned") is None
    assert not css(page, "#log script, #log img")
    shot(page, artifacts, "xss")


def test_a_reload_mid_turn_follows_the_running_turn_to_its_end(page: Any, artifacts: Path) -> None:
    send(page, "count again")
    wait_for(lambda: "Counting:" in log_text(page), "the first words")
    page.refresh()
    wait_for(lambda: "count again" in log_text(page), "the resumed conversation")
    wait_for(lambda: "two, done." in log_text(page), "the end of the turn, streamed after the reload")
    bubbles = [b.text for b in css(page, ".msg.assistant")]
    assert "".join(bubbles) == "Counting:one,two, done.", bubbles
    assert log_text(page).count("Counting:") == 1, "no piece shown twice"
    wait_for(lambda: css(page, "#send")[0].is_enabled(), "the chat to be idle")
    shot(page, artifacts, "reload-mid-turn")


def test_after_a_reload_thinking_stays_folded_and_each_turn_keeps_its_usage(page: Any) -> None:
    send(page, "think first")
    wait_for(lambda: "Thought it through." in log_text(page), "the answer")
    send(page, "hello")
    wait_for(lambda: len(css(page, ".turn-usage")) == 2, "two turns")
    page.refresh()
    wait_for(lambda: "Thought it through." in log_text(page), "the resumed conversation")
    folded = css(page, "details.thinking")
    assert len(folded) == 1 and folded[0].get_attribute("open") is None
    assert not folded[0].find_elements("css selector", "pre")[0].is_displayed()
    usage = css(page, ".turn-usage")
    assert len(usage) == 2 and all("tokens:" in u.text and "$" in u.text for u in usage)
