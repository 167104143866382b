"""A long state in the browser: the state page shows one page of turns at a time and
walks to any of them, and the budget chart groups turns into at most its bar count.

The session is the bench's generator's (bench/generate.py, lean Claude Code shape,
20,500 turns, committed by the real ``opal commit``); the bench's ``web.state`` row
times the same pages at 100,000 turns.
"""

from __future__ import annotations

import json

import pytest

from bench.generate import generate
from tests.cli.test_web import Web
from tests.conftest import git, opal

TURNS = 20_500  # past the 20,000 turns up to which the budget page plans its cuts unasked
PAGE = 200
LAST = TURNS - (TURNS - 1) % PAGE  # the first turn of the last page


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    root = tmp_path_factory.mktemp("big")
    project = root / "project"
    git("init", "-q", str(project))
    git("commit", "-q", "--allow-empty", "-m", "initial code", cwd=str(project))
    session = str(root / "session.jsonl")
    generate("claude", session, turns=TURNS, seed=7, profile="lean")
    for args in (("init",), ("commit", "--file", session, "-m", "a long session")):
        r = opal(*args, cwd=project)
        assert r.returncode == 0, r.stderr
    return project


@pytest.fixture(scope="module")
def big_server(big):
    w = Web(big)
    yield w
    code, err = w.stop()
    assert code == 0, err


def _cli(project, *args):
    r = opal(*args, "--json", cwd=project)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _shown(browser) -> list[tuple[int, str, str]]:
    return [(int(n), role, tool) for n, role, tool in browser.driver.execute_script(
        "return [...document.querySelectorAll('.turn')].map(t => [t.dataset.turn,"
        " t.querySelector('.role').textContent, t.querySelector('.tool').textContent]);")]


def test_a_long_state_opens_one_page_at_a_time_and_walks_to_any_turn(big, big_server, browser):
    log = _cli(big, "log", "--turns")["turns"]
    assert len(log) == TURNS
    want = {t["turn"]: (t["turn"], t["role"] or "", t["tool"] or "") for t in log}
    browser.open(big_server.url)
    browser.go("#/state/HEAD")
    assert int(browser.one("#state-info").get_attribute("data-turns")) == TURNS
    assert _shown(browser) == [want[n] for n in range(1, PAGE + 1)]
    assert "turns 1–200 of 20,500" in browser.one(".pager .range").text
    assert browser.all(".pager span.prev.off") and browser.all(".pager span.first.off")

    browser.driver.execute_script("document.body.dataset.ready = '0';")
    browser.one(".pager a.last").click()
    browser.wait_ready()
    assert _shown(browser) == [want[n] for n in range(LAST, TURNS + 1)]
    assert browser.all(".pager span.next.off")

    browser.driver.execute_script("document.body.dataset.ready = '0';")
    browser.one(".pager a.prev").click()
    browser.wait_ready()
    assert _shown(browser)[0] == want[LAST - PAGE]

    # The jump form: any turn, on its page, marked and scrolled into view.
    field = browser.one(".pager form.jump input[name=turn]")
    field.send_keys("12345")
    browser.driver.execute_script("document.body.dataset.ready = '0';")
    browser.one(".pager form.jump button").click()
    browser.wait_ready()
    shown = _shown(browser)
    assert shown[0][0] == 12_201 and shown[-1][0] == 12_400
    target = browser.one('.turn[data-turn="12345"]')
    assert "target" in target.get_attribute("class").split()
    assert browser.driver.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight;", target)
    # Only the page's turns are in the document, whatever the state's length.
    assert browser.driver.execute_script("return document.querySelectorAll('.turn').length") == PAGE


def test_the_budget_of_a_long_state_groups_turns_into_bars_and_plans_cuts_when_asked(big, big_server, browser):
    stats = _cli(big, "stats")
    browser.open(big_server.url)
    browser.go("#/budget/HEAD")
    bars = browser.driver.execute_script(
        "return [...document.querySelectorAll('rect.bar')]"
        ".map(b => [+b.dataset.first, +b.dataset.last, +b.dataset.tokens]);")
    assert 1 < len(bars) <= 400
    assert bars[0][0] == 1 and bars[-1][1] == TURNS
    assert all(a[1] + 1 == b[0] for a, b in zip(bars, bars[1:]))
    assert sum(t for _, _, t in bars) == stats["tokens_estimate"]
    assert "Tokens per group of turns" in browser.one("main h2").text
    # The cuts of a long state wait for a click, then are the API's.
    assert browser.one("#cuts").get_attribute("data-ready") == "0" and not browser.all(".cut")
    browser.one("#plan-cuts").click()
    browser.wait_for('#cuts[data-ready="1"]', timeout=300)
    want = big_server.api("cuts", rev="HEAD")["cuts"]
    assert want and [c.text for c in browser.all(".cut code.cmd")] == [c["command"] for c in want]
