"""The web chat as people use it, in a real headless Chromium (the harness of
``test_serve_webchat``), each feature at desktop (1280 px) and phone (400 px) width: the chat
list as a drawer at phone width, Markdown through the vendored marked + DOMPurify, copy,
regenerate, edit-and-resend, rename / delete / search of sessions, image upload, dark mode, and
hostile model text (HTML, scripts, javascript: links, bidi and terminal controls) shown escaped
exactly as the CLI shows it. Screenshots go to ``$FOUNDATION_AI_TEST_ARTIFACTS`` (else a pytest
tmp dir)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foundation_ai._cli.safe_text import visible, visible_line
from foundation_ai.serve import ServerThread
from tests import test_serve_webchat as webchat
from tests._serve_helpers import serving
from tests._webchat_ui import DESKTOP, PHONE, png, set_scheme, set_width, ui_agent
from tests.test_serve_webchat import css, log_text, send, shot, wait_for

pytestmark = webchat.pytestmark
artifacts = webchat.artifacts
browser = webchat.browser

UNSAFE = [chr(c) for c in (*range(0, 9), *range(11, 32), *range(0x7F, 0xA0))] + list(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
)


@pytest.fixture(scope="module")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, str]]:
    with serving(tmp_path_factory.mktemp("webchat-ui"), agents=[ui_agent()]) as (srv, keys):
        yield srv, keys.create("browser")[1]


def open_page(driver: Any, app_server: tuple[ServerThread, str], size: tuple[int, int]) -> Any:
    """The chat at ``size``, with the key stored, a new chat open and the light theme."""
    srv, key = app_server
    set_width(driver, size)
    set_scheme(driver, "light")
    driver.get(srv.url + "/")
    driver.execute_script(
        "localStorage.setItem('fai-key', arguments[0]); localStorage.removeItem('fai-session');"
        "localStorage.removeItem('fai-theme');",
        key,
    )
    driver.refresh()
    wait_for(lambda: css(driver, "body[data-ready] #agent option"), "the agent list")
    return driver


@pytest.fixture(params=["desktop", "phone"])
def page(request: pytest.FixtureRequest, browser: Any, app_server: tuple[ServerThread, str]) -> Any:
    return open_page(browser, app_server, DESKTOP if request.param == "desktop" else PHONE)


def is_phone(driver: Any) -> bool:
    return bool(driver.execute_script("return window.innerWidth < 800"))


def side_open(driver: Any) -> None:
    """Make the chat list reachable (at phone width: open the drawer)."""
    if is_phone(driver) and not css(driver, "body.side-open"):
        css(driver, "#open-side")[0].click()
        wait_for(
            lambda: css(driver, "#side")[0].is_displayed() and visible_rect(driver, "#side"), "the drawer"
        )


def visible_rect(driver: Any, sel: str) -> bool:
    """The element lies inside the viewport (not slid out to the left)."""
    r = driver.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect(); return [r.left, r.right];",
        sel,
    )
    return bool(r[0] >= -1 and r[1] > 10)


def last_answer(driver: Any) -> Any:
    return css(driver, ".msg.assistant")[-1]


def name(driver: Any, base: str) -> str:
    return f"{base}-{'phone' if is_phone(driver) else 'desktop'}"


# ---- layout ---------------------------------------------------------------------------------


def test_at_phone_width_the_chat_list_is_a_drawer_over_the_conversation(
    browser: Any, app_server: tuple[ServerThread, str], artifacts: Path
) -> None:
    page = open_page(browser, app_server, PHONE)
    send(page, "hello drawer")
    wait_for(lambda: "Answer #1 to: hello drawer" in log_text(page), "the answer")
    width = page.execute_script("return window.innerWidth")
    log_width = page.execute_script("return document.querySelector('#log').getBoundingClientRect().width")
    assert width == PHONE[0]
    assert log_width >= 0.95 * width, f"the conversation takes the width ({log_width} of {width})"
    assert not css(page, "#side")[0].is_displayed(), "the list is hidden until asked for"
    opener = css(page, "#open-side")[0]
    assert opener.is_displayed() and opener.get_attribute("aria-expanded") == "false"
    opener.click()
    wait_for(lambda: css(page, "#side")[0].is_displayed() and visible_rect(page, "#side"), "the drawer open")
    assert opener.get_attribute("aria-expanded") == "true"
    side_width = page.execute_script("return document.querySelector('#side').getBoundingClientRect().width")
    assert side_width <= 0.9 * width
    shot(page, artifacts, "drawer-open-phone")
    from selenium.webdriver.common.action_chains import ActionChains

    # a tap beside the drawer (on the dimmed conversation, right of the drawer) closes it
    ActionChains(page).move_to_element_with_offset(
        css(page, "#scrim")[0], width // 2 - 15, 0
    ).click().perform()
    wait_for(lambda: not css(page, "#side")[0].is_displayed(), "the drawer closed")
    opener.click()

    def chat_in_open_drawer() -> bool:  # the drawer slides in: wait until the button can be tapped
        buttons = css(page, "#sessions li.session button.open")
        return bool(buttons) and buttons[0].is_displayed() and bool(visible_rect(page, "#side"))

    wait_for(chat_in_open_drawer, "the chat in the open drawer")
    css(page, "#sessions li.session button.open")[0].click()  # opening a chat closes it too
    wait_for(lambda: not css(page, "#side")[0].is_displayed(), "the drawer closed after choosing")
    wait_for(lambda: "hello drawer" in log_text(page), "the chosen chat")


def test_at_desktop_width_the_chat_list_stays_beside_the_conversation(
    browser: Any, app_server: tuple[ServerThread, str]
) -> None:
    page = open_page(browser, app_server, DESKTOP)
    assert css(page, "#side")[0].is_displayed()
    assert not css(page, "#open-side")[0].is_displayed(), "no drawer button on a wide screen"
    side = page.execute_script("return document.querySelector('#side').getBoundingClientRect().width")
    assert side <= 0.25 * DESKTOP[0]


# ---- Markdown, copy ---------------------------------------------------------------------------


def test_markdown_answers_show_headings_lists_tables_code_and_links(page: Any, artifacts: Path) -> None:
    send(page, "markdown please")
    wait_for(lambda: css(page, ".msg.assistant .code pre code"), "the rendered code block")
    bubble = last_answer(page)
    find = bubble.find_elements
    assert find("css selector", "h2")[0].text == "Plan"
    assert [li.text for li in find("css selector", "ul > li")] == ["first item", "second item"]
    assert (
        find("css selector", "ul em")[0].text == "item"
        and find("css selector", "ul strong")[0].text == "item"
    )
    assert [li.text for li in find("css selector", "ol > li")] == ["one", "two"]
    assert [th.text for th in find("css selector", "table th")] == ["name", "value"]
    assert [td.text for td in find("css selector", "table td")] == ["alpha", "1", "beta", "2"]
    code = find("css selector", ".code pre code")[0]
    assert code.text == 'print("hi")' and "language-python" in (code.get_attribute("class") or "")
    assert "python" in find("css selector", ".code .code-bar")[0].text
    link = find("css selector", "a")[0]
    assert link.text == "the docs" and link.get_attribute("href") == "https://example.com/docs"
    assert link.get_attribute("target") == "_blank"
    assert set((link.get_attribute("rel") or "").split()) >= {"noopener", "noreferrer"}
    assert find("css selector", "p code")[-1].text == "inline"
    shot(page, artifacts, name(page, "markdown"))


def grant_clipboard(driver: Any) -> None:
    origin = driver.execute_script("return location.origin")
    driver.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": origin, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )


def clipboard(driver: Any) -> str:
    return str(
        driver.execute_async_script(
            "const done = arguments[0]; navigator.clipboard.readText().then(done, (e) => done('ERR ' + e));"
        )
    )


def test_copy_buttons_put_the_code_and_the_message_on_the_clipboard(page: Any) -> None:
    grant_clipboard(page)
    send(page, "markdown please")
    button = wait_for(lambda: css(page, ".msg.assistant .copy-code"), "the code's copy button")[-1]
    button.click()
    wait_for(lambda: button.text == "Copied", "the copied mark")
    assert clipboard(page) == 'print("hi")\n'
    copy_answer = css(page, ".from-assistant .msg-actions .copy")[-1]
    copy_answer.click()
    wait_for(lambda: clipboard(page).startswith("## Plan"), "the whole answer's Markdown on the clipboard")
    assert "| alpha | 1 |" in clipboard(page)
    css(page, ".from-user .msg-actions .copy")[-1].click()
    wait_for(lambda: clipboard(page) == "markdown please", "the prompt on the clipboard")


# ---- hostile text -----------------------------------------------------------------------------


def raw_controls(driver: Any, sel: str) -> list[str]:
    """The unsafe characters present as such in the text under ``sel`` (should be none)."""
    text = str(driver.execute_script("return document.querySelector(arguments[0]).textContent", sel))
    return sorted({f"U+{ord(c):04X}" for c in text if c in UNSAFE})


def test_hostile_model_text_never_runs_and_its_controls_show_escaped(page: Any, artifacts: Path) -> None:
    page.execute_script("window.__pwned = undefined;")
    send(page, "hostile please")
    wait_for(lambda: "end" in log_text(page) and css(page, ".msg.assistant .ctl"), "the hostile answer")
    bubble = last_answer(page)
    assert page.execute_script("return window.__pwned") is None
    assert not bubble.find_elements("css selector", "script, img, iframe, object, embed, svg, form")
    assert "<script>window.__pwned = 1</script>" in bubble.text, "model HTML is shown as text"
    hrefs = [a.get_attribute("href") for a in bubble.find_elements("css selector", "a")]
    assert not any(h and not h.startswith(("http:", "https:", "mailto:")) for h in hrefs), hrefs
    assert "click me" in bubble.text and "raw link" in bubble.text, "a dropped link keeps its text"
    escapes = [s.text for s in bubble.find_elements("css selector", ".ctl")]
    assert escapes[:2] == ["\\u202e", "\\u2066"], escapes
    assert {"\\x1b", "\\x07", "\\x9b"} <= set(escapes)
    assert "\\u202e" in bubble.find_elements("css selector", ".code pre")[0].text, "code blocks too"
    assert raw_controls(page, "#log") == [], "no control or bidi character reaches the page as is"
    for a in bubble.find_elements("css selector", "a"):  # clicking what is left goes nowhere harmful
        a.click()
    page.switch_to.window(page.window_handles[0])
    assert page.execute_script("return window.__pwned") is None
    shot(page, artifacts, name(page, "hostile"))
    page.refresh()  # history renders the same way
    wait_for(lambda: css(page, ".msg.assistant .ctl"), "the resumed answer")
    assert page.execute_script("return window.__pwned") is None
    assert raw_controls(page, "#log") == []


def test_the_page_escapes_text_exactly_like_the_cli(page: Any) -> None:
    samples = [
        "".join(UNSAFE) + "\n\t\r\nplain é 中 \U0001f600",
        "true ls -la # \u202e ; touch PWNED ; :\u2066",
        "a\r\nb\rc",
        "nothing to escape",
    ]
    for s in samples:
        got = page.execute_script(
            "return [SafeText.visible(arguments[0]), SafeText.visibleLine(arguments[0])]", s
        )
        assert got == [visible(s), visible_line(s)], s


def test_tool_arguments_results_and_session_titles_show_controls_escaped(page: Any) -> None:
    send(page, "echo \u202eevil\u2066 title")
    panel = wait_for(
        lambda: css(page, ".tool-panel .result .ctl") and css(page, ".tool-panel"), "the tool result"
    )[0]
    assert "\\u202e" in panel.find_elements("css selector", ".args")[0].text
    assert "\\u202eresult\\x1b[31m" in panel.find_elements("css selector", ".result")[0].text
    wait_for(lambda: "\\u202e" in css(page, "#chat-title")[0].text, "the escaped title in the header")
    side_open(page)
    title = wait_for(lambda: css(page, "#sessions li.active button.open"), "the chat in the list")[0]
    assert "echo \\u202eevil\\u2066 title" in title.text
    assert raw_controls(page, "#sessions") == [] and raw_controls(page, "#log") == []
    assert raw_controls(page, "#top") == []


# ---- regenerate, edit -------------------------------------------------------------------------


def titles(driver: Any) -> list[str]:
    return [b.text for b in css(driver, "#sessions li.session button.open")]


def session_ids(driver: Any) -> list[str]:
    return [str(x) for x in driver.execute_script("return state.sessions.map((s) => s.id)")]


def test_regenerate_replaces_the_answer_with_a_new_one(page: Any) -> None:
    story = name(page, "tell me a regen story")
    send(page, story)
    wait_for(lambda: f"Answer #1 to: {story}" in log_text(page), "the first answer")
    before = page.execute_script("return state.session")
    wait_for(lambda: before in session_ids(page), "the chat in the list")
    count = len(session_ids(page))
    css(page, ".from-assistant .msg-actions .regenerate")[-1].click()
    wait_for(lambda: f"Answer #2 to: {story}" in log_text(page), "the regenerated answer")
    assert "Answer #1" not in log_text(page), "the old answer is replaced"
    assert log_text(page).count(story) == 2, "the prompt once, quoted once in the answer"
    wait_for(lambda: css(page, "#send")[0].is_enabled(), "the chat to be idle")
    assert page.execute_script("return state.session") != before
    wait_for(
        lambda: len(session_ids(page)) == count and before not in session_ids(page), "one chat, the new one"
    )
    page.refresh()  # what is stored is what is shown
    wait_for(lambda: f"Answer #2 to: {story}" in log_text(page), "the stored regenerated answer")
    assert "Answer #1" not in log_text(page)


def test_edit_and_resend_replaces_the_prompt_and_what_followed(page: Any, artifacts: Path) -> None:
    send(page, "first question")
    wait_for(lambda: "Answer #" in log_text(page) and "first question" in log_text(page), "the first answer")
    send(page, "second question")
    wait_for(lambda: "to: second question" in log_text(page), "the second answer")
    css(page, ".from-user .msg-actions .edit")[0].click()
    area = wait_for(lambda: css(page, ".edit-box textarea"), "the edit box")[0]
    assert area.get_attribute("value") == "first question"
    area.clear()
    area.send_keys("edited question")
    shot(page, artifacts, name(page, "edit"))
    css(page, ".edit-box .edit-send")[0].click()
    wait_for(lambda: "to: edited question" in log_text(page), "the answer to the edited prompt")
    text = log_text(page)
    assert "first question" not in text and "second question" not in text, "what followed is replaced"
    assert [m.text for m in css(page, ".msg.user")] == ["edited question"]


# ---- sessions ---------------------------------------------------------------------------------


def test_sessions_can_be_renamed_searched_and_deleted(page: Any, artifacts: Path) -> None:
    tag = name(page, "")
    for text in (f"apples and pears{tag}", f"bananas only{tag}"):
        side_open(page)
        css(page, "#new")[0].click()
        wait_for(lambda: not css(page, "body.side-open"), "the drawer closed")
        send(page, text)
        wait_for(lambda t=text: f"to: {t}" in log_text(page), "the answer")
    side_open(page)
    item = wait_for(lambda: css(page, "#sessions li.active"), "the current chat")[0]
    item.find_elements("css selector", "button.rename")[0].click()
    box = wait_for(lambda: css(page, "#sessions .rename-input"), "the rename box")[0]
    box.clear()
    box.send_keys("Fruit \u202eplan\n")
    wait_for(
        lambda: "Fruit \\u202eplan" in css(page, "#sessions li.active")[0].text, "the new title, escaped"
    )
    wait_for(lambda: "Fruit" in css(page, "#chat-title")[0].text, "the header follows")
    search = css(page, "#search")[0]
    search.send_keys(f"APPLES AND PEARS{tag.upper()}")
    wait_for(lambda: titles(page) == [f"apples and pears{tag}"], "one match")
    shot(page, artifacts, name(page, "search"))
    search.clear()
    search.send_keys("no such chat")
    wait_for(lambda: css(page, "#sessions li.empty"), "no match")
    search.clear()
    search.send_keys(" ")  # an input event with an empty query lists everything again
    wait_for(lambda: len(css(page, "#sessions li.session")) >= 2, "the whole list")
    active = css(page, "#sessions li.active")[0]
    sid = active.get_attribute("data-id")
    active.find_elements("css selector", "button.delete")[0].click()
    wait_for(lambda: css(page, "#sessions .confirm-delete"), "the confirmation")[0].click()
    wait_for(lambda: sid not in session_ids(page), "the chat gone from the list")
    assert not css(page, f'#sessions li[data-id="{sid}"]')
    assert page.execute_script("return state.session") is None, "the deleted chat is closed"
    status = page.execute_script(
        "return fetch('/v1/sessions/' + arguments[0], {headers: {Authorization: 'Bearer ' + state.key}})"
        ".then((r) => r.status)",
        sid,
    )
    assert status == 404


# ---- images -----------------------------------------------------------------------------------


def test_an_attached_image_reaches_the_model_and_shows_in_the_chat(
    page: Any, artifacts: Path, tmp_path: Path
) -> None:
    picture = tmp_path / "red.png"
    data = png(96, 64)
    picture.write_bytes(data)
    css(page, "#file")[0].send_keys(str(picture))
    chip = wait_for(lambda: css(page, "#attachments .chip"), "the attachment chip")[0]
    assert "red.png" in chip.text
    # frames come late on a loaded machine: here 0.5 s late, so that the text is not yet drawn
    # when the turn's end arrives
    page.execute_script("window.requestAnimationFrame = (f) => setTimeout(f, 500)")
    send(page, "what is this?")
    # the turn's usage line is drawn after its last text piece, never before (pieces are drawn
    # once per animation frame; the end of the turn draws what is pending first)
    wait_for(lambda: css(page, ".turn-usage"), "the end of the turn")
    assert f"I see 1 image(s): image/png of {len(data)} bytes. You said: what is this?" in log_text(page)
    assert not css(page, "#attachments .chip"), "the attachments are sent and cleared"
    thumb = css(page, ".msg.user img.thumb")[0]
    assert thumb.get_attribute("src").startswith("data:image/png;base64,")
    wait_for(
        lambda: page.execute_script("return arguments[0].naturalWidth", thumb) == 96, "the decoded image"
    )
    shot(page, artifacts, name(page, "image"))
    page.refresh()
    thumb = wait_for(lambda: css(page, ".msg.user img.thumb"), "the stored image")[0]
    wait_for(
        lambda: page.execute_script("return arguments[0].naturalWidth", thumb) == 96, "the decoded image"
    )
    assert "what is this?" in css(page, ".msg.user")[0].text, "the image and its text in one bubble"


def test_a_large_image_is_scaled_down_before_it_is_sent(page: Any, tmp_path: Path) -> None:
    picture = tmp_path / "noise.png"
    picture.write_bytes(png(1400, 80, noise=True))
    assert picture.stat().st_size > 300_000  # over the page's keep-as-is size
    css(page, "#file")[0].send_keys(str(picture))
    wait_for(lambda: css(page, "#attachments .chip"), "the attachment chip")
    send(page, "a big one")
    wait_for(lambda: "I see 1 image(s): image/jpeg" in log_text(page), "the model's answer about the image")
    thumb = css(page, ".msg.user img.thumb")[0]
    size = wait_for(
        lambda: (
            page.execute_script("return [arguments[0].naturalWidth, arguments[0].naturalHeight]", thumb)
            if page.execute_script("return arguments[0].naturalWidth", thumb)
            else None
        ),
        "the decoded image",
    )
    assert size == [1280, 73], "the longest side scaled to 1,280 px, the ratio kept"


def test_a_removed_attachment_is_not_sent(page: Any, tmp_path: Path) -> None:
    picture = tmp_path / "red.png"
    picture.write_bytes(png())
    css(page, "#file")[0].send_keys(str(picture))
    wait_for(lambda: css(page, "#attachments .chip .remove-attachment"), "the chip")[0].click()
    wait_for(lambda: not css(page, "#attachments .chip"), "the chip removed")
    send(page, "no picture here")
    wait_for(lambda: "to: no picture here" in log_text(page), "a text-only answer")
    assert "I see" not in log_text(page)


# ---- dark mode --------------------------------------------------------------------------------


def background(driver: Any) -> str:
    return str(driver.execute_script("return getComputedStyle(document.body).backgroundColor"))


def test_dark_mode_follows_the_system_and_the_toggle_overrides_it(page: Any, artifacts: Path) -> None:
    light = "rgb(255, 255, 255)"
    assert background(page) == light
    set_scheme(page, "dark")
    wait_for(lambda: background(page) != light, "the system's dark scheme")
    dark = background(page)
    send(page, "markdown please")
    wait_for(lambda: css(page, ".msg.assistant .code"), "an answer")
    shot(page, artifacts, name(page, "dark"))
    toggle = css(page, "#theme")[0]
    assert "system" in toggle.get_attribute("aria-label")
    toggle.click()  # system -> light
    wait_for(lambda: background(page) == light, "the light theme despite the dark system")
    toggle.click()  # light -> dark
    wait_for(lambda: background(page) == dark, "the dark theme")
    set_scheme(page, "light")
    page.refresh()
    wait_for(lambda: css(page, "body[data-ready]"), "the reloaded page")
    assert background(page) == dark, "the choice is kept across a reload"
    css(page, "#theme")[0].click()  # dark -> system (light)
    wait_for(lambda: background(page) == light, "back to the system's scheme")


def test_controls_are_styled_not_browser_defaults(page: Any) -> None:
    style = page.execute_script(
        "const s = getComputedStyle(document.querySelector('#send'));"
        "return [s.borderRadius, s.backgroundColor, s.color];"
    )
    assert style[0] != "0px" and style[1] not in ("rgb(239, 239, 239)", "rgba(0, 0, 0, 0)")
    prompt = page.execute_script("return getComputedStyle(document.querySelector('#prompt')).borderRadius")
    assert prompt != "0px"


# ---- hostile file names -----------------------------------------------------------------------


def test_a_hostile_file_name_is_shown_escaped(page: Any, tmp_path: Path) -> None:
    picture = tmp_path / "x\u202egnp.png"
    picture.write_bytes(png())
    css(page, "#file")[0].send_keys(str(picture))
    chip = wait_for(lambda: css(page, "#attachments .chip"), "the attachment chip")[0]
    assert "x\\u202egnp.png" in chip.text
    assert raw_controls(page, "#attachments") == []
