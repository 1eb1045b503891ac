"""The dashboard in a real headless Chromium (Debian's, through Selenium and its driver): list,
follow a clone live, answer, send, stop; no token, no page; no planted secret on a page. Each
view is saved as a screenshot in build/screenshots/."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from shadowclone.config import Paths
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressKind, ProgressLine, Record, State, Step
from shadowclone.plugin.node import LocalNode
from shadowclone_fake_launch.scripts import Play, Script
from shadowclone_testing.harness import skip_or_fail
from shadowclone_testing.serving import Scripts, serving, wait_state
from shadowclone_testing.web import PLANTED, Site

SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"
WAIT_S = 20.0

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is a dev dependency")
from selenium.common.exceptions import TimeoutException, WebDriverException  # noqa: E402
from selenium.webdriver import Chrome  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture
def browser() -> Iterator[Chrome]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        skip_or_fail("no Chromium here (scripts/install-browser installs Debian's)")
    assert chromium is not None and driver is not None
    os.environ.setdefault("SE_OFFLINE", "true")  # the driver is Debian's: fetch nothing
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1200,800")
    session = webdriver.Chrome(options=options, service=webdriver.ChromeService(driver))
    session.set_page_load_timeout(WAIT_S)
    try:
        yield session
    finally:
        session.quit()


def until(browser: Chrome, check: Callable[[Chrome], object]) -> None:
    try:
        # A form posted reloads the page: an element read meanwhile may be the old page's.
        WebDriverWait(
            browser, WAIT_S, poll_frequency=0.1, ignored_exceptions=(WebDriverException,)
        ).until(check)
    except TimeoutException:
        shot(browser, "timed-out")  # what the page showed instead
        raise


def press(browser: Chrome, by: str, what: str) -> None:
    """Click, again should the live page have replaced the element meanwhile."""

    def clicked(page: Chrome) -> bool:
        page.find_element(by, what).click()
        return True

    until(browser, clicked)


def shot(browser: Chrome, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def text(browser: Chrome, element_id: str) -> str:
    return str(browser.find_element(By.ID, element_id).text)


def test_the_owner_follows_answers_sends_and_stops_in_a_real_browser(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site, browser: Chrome
) -> None:
    sc_ready.set("acme/app#1", Script(play=Play.ASK))
    sc_ready.set("acme/app#2", Script(play=Play.ECHO))
    sc_ready.set("acme/app#3", Script(play=Play.HANG))
    asking, echoing, hanging = (sc_node.start(f"acme/app#{n}") for n in (1, 2, 3))
    RunFolder(sc_home.clones_dir / hanging.id).append_progress(
        ProgressLine(Step.ENGINE, ProgressKind.TEXT, f"the engine printed {PLANTED} planted")
    )
    with serving(sc_node):
        browser.get(f"{site.url}/")
        assert "log in first" in browser.page_source  # no token, no page
        browser.get(site.login_url())
        until(browser, lambda b: all(c.id in text(b, "clones") for c in (asking, echoing)))
        until(browser, lambda b: "waiting" in text(b, "clones"))  # live: the list streams
        shot(browser, "list")

        press(browser, By.LINK_TEXT, asking.id)
        until(browser, lambda b: "Question q1" in text(b, "question"))
        shot(browser, "question")
        press(browser, By.XPATH, "//button[@value='right']")
        until(
            browser, lambda b: "answer to q1: right (by owner via dashboard)" in text(b, "progress")
        )
        until(browser, lambda b: "done" in text(b, "summary"))
        shot(browser, "answered")

        browser.get(f"{site.url}/clones/{echoing.id}")
        until(browser, lambda b: "running" in text(b, "summary"))
        field = browser.find_element(By.NAME, "text")
        field.send_keys("hello from the browser")
        press(browser, By.XPATH, "//button[text()='Send']")
        until(browser, lambda b: "hello from the browser" in text(b, "progress"))
        shot(browser, "follow")

        browser.get(f"{site.url}/clones/{hanging.id}")
        until(browser, lambda b: "planted" in text(b, "progress"))
        assert PLANTED not in browser.page_source
        press(browser, By.XPATH, "//button[text()='Stop']")
        until(browser, lambda b: "stopped" in text(b, "summary"))  # live, as serve records it
        shot(browser, "stopped")
        sc_node.stop(echoing.id)
        wait_state(sc_home, echoing.id, State.STOPPED)
    for name in ("list", "question", "answered", "follow", "stopped"):
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 1000


INJECTED = """
window.violations = [];
document.addEventListener(
  'securitypolicyviolation', ev => window.violations.push(ev.violatedDirective));
const script = document.createElement('script');
script.textContent = 'window.ran = "inline script";';
document.body.appendChild(script);
const image = document.createElement('img');
image.setAttribute('onerror', 'window.ran = "inline handler";');
image.src = '/no-such-image';
document.body.appendChild(image);
"""


def test_an_injected_inline_script_does_not_run_and_the_live_page_still_does(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site, browser: Chrome
) -> None:
    """The page's policy allows scripts from the dashboard's own files only: a script or an
    event handler that something manages to put into the page does not run."""
    sc_ready.set("acme/app#1", Script(play=Play.HANG))
    clone = sc_node.start("acme/app#1")
    with serving(sc_node):
        browser.get(site.login_url())
        browser.get(f"{site.url}/clones/{clone.id}")
        until(browser, lambda b: "running" in text(b, "summary"))  # its own script streams
        browser.execute_script(INJECTED)
        until(browser, lambda b: len(b.execute_script("return window.violations")) >= 2)
        assert browser.execute_script("return window.ran === undefined")
        violated = browser.execute_script("return window.violations")
        assert all(directive.startswith("script-src") for directive in violated)
        sc_node.stop(clone.id)
        wait_state(sc_home, clone.id, State.STOPPED)
        until(browser, lambda b: "stopped" in text(b, "summary"))


PR_URLS = [
    "https://github.com/acme/app/pull/7",
    "HTTP://github.com/acme/app/pull/7",
    "javascript:alert(document.cookie)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "\x01javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "https://github.com@evil.example/acme/app/pull/7",
    "https://github.com:x@evil.example/",
    "https:evil.example/acme/app/pull/7",
    "https:\\\\evil.example/pull/7",
    "//evil.example/pull/7",
    "https://",
]


def test_a_pull_request_is_a_link_only_to_a_plain_web_address(
    sc_node: LocalNode, sc_home: Paths, sc_ready: Scripts, site: Site, browser: Chrome
) -> None:
    """Whatever a record says its pull request is, the page links only to an http(s) address
    that leads where it reads (no user part), as Chromium itself parses the link; anything
    else is shown as text."""
    clone = sc_node.start("acme/app#1")
    folder = RunFolder(sc_home.clones_dir / clone.id)
    browser.get(site.login_url())
    for pr_url in PR_URLS:
        folder.write_record(Record(id=clone.id, state=State.DONE, pr_url=pr_url))
        browser.get(f"{site.url}/clones/{clone.id}")
        until(browser, lambda b: "pull request" in text(b, "summary"))
        links = browser.execute_script(
            "return [...document.links].map(a => [a.protocol, a.username, a.password, a.href])"
        )
        for protocol, username, password, href in links:
            assert protocol in ("http:", "https:"), (pr_url, href)
            assert username == password == "", (pr_url, href)
        linked = [href for *_, href in links if "pull" in href]
        assert bool(linked) is (pr_url in PR_URLS[:2]), pr_url
