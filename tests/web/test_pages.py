"""``opal web``'s pages in a real headless Chromium, on a repository built by the real
commands (tests/web/conftest.py): what each page shows is checked against what the
command line says of the same repository, each page is photographed, and every
request the browser made is checked to have gone to 127.0.0.1 and nowhere else.

Tests share one browser and one server per module and run in file order; each opens
the page it checks, so none depends on what another left on screen.
"""

from __future__ import annotations

import os
import urllib.parse

from tests.web.conftest import SECRET, copy_site


def test_a_wrong_token_is_refused_with_403_and_the_printed_url_lets_the_browser_in(server, browser):
    bad = f"http://127.0.0.1:{server.port}/?token={'x' * len(server.token)}"
    browser.open(bad, ready=False)
    assert "403 Forbidden" in browser.one("body").text
    browser.open(f"http://127.0.0.1:{server.port}/api/refs", ready=False)  # no token, no cookie yet
    assert "403 Forbidden" in browser.one("body").text
    statuses = {r["url"]: r["status"] for r in browser.requests()}
    assert statuses[bad] == 403 and statuses[f"http://127.0.0.1:{server.port}/api/refs"] == 403
    browser.open(server.url)  # the printed URL: its token becomes a cookie and the page loads
    assert browser.driver.current_url == f"http://127.0.0.1:{server.port}/#/graph" or \
        browser.driver.current_url == f"http://127.0.0.1:{server.port}/"
    assert browser.page() == "graph" and not browser.error()
    # Without a token in the URL, the cookie alone now lets it in.
    browser.open(f"http://127.0.0.1:{server.port}/#/ops")
    assert browser.page() == "ops" and not browser.error()


def test_the_graph_draws_every_commit_and_link_of_every_branch(site, page, shots):
    page.go("#/graph")
    nodes = page.attr("circle.node", "data-oid")
    hollow = page.attr("circle.node.abandoned", "data-oid")
    edges = list(zip(page.attr("path.edge", "data-from"), page.attr("path.edge", "data-to")))
    # Every live commit is one `opal log` names, in the same (topological) order...
    live = [n for n in nodes if n not in hollow]
    want = site.run("log", "--format=%H", "--topo-order", "main", "fork", "secrets", "origin/main").stdout.split()
    assert live == want
    # ...the one rewind that `opal undo` took back is drawn hollow, kept by the op log alone...
    assert len(hollow) == 1
    assert site.git("cat-file", "-t", hollow[0]).strip() == "commit"
    # ...and each commit has one edge per parent: two states the hook recorded, the fork
    # and its drop, the rewind, the merge (two parents), the undone rewind and the secrets
    # session: 8 commits, 8 links.
    parents = {oid: site.git("rev-list", "--parents", "-n", "1", oid).split()[1:] for oid in nodes}
    assert sorted(edges) == sorted((c, p) for c, ps in parents.items() for p in ps)
    assert len(nodes) == 8 and len(edges) == 8
    assert sum(len(ps) == 2 for ps in parents.values()) == 1
    assert len(page.all("path.edge.merge")) == 1
    # Branch, remote branch and linked code commit labels, as `opal log` and `opal at` say.
    rows = {r.get_attribute("data-oid"): r for r in page.all(".commit-row")}
    refs = {oid: sorted(x.text for x in row.find_elements("css selector", ".ref")) for oid, row in rows.items()}
    main, fork, secrets = (site.git("rev-parse", f"refs/opal/heads/{b}").strip() for b in ("main", "fork", "secrets"))
    assert refs[main] == ["main", "origin/main"] and refs[fork] == ["fork"] and refs[secrets] == ["secrets"]
    codes = sorted(c.text.replace("⎇", "").strip() for c in page.all(".commit-row .code-commit"))
    want_codes = sorted(site.git("log", "-2", "--format=%h", "--abbrev=7", "HEAD").split())
    assert codes == want_codes
    msgs = {oid: row.find_element("css selector", ".msg").text for oid, row in rows.items()}
    assert msgs[main] == "merge fork"
    turns = {oid: int(row.find_element("css selector", ".turns").text) for oid, row in rows.items()}
    assert turns[main] == site.json("stats", "main")["turns"]
    page.screenshot(shots, "graph")


def test_clicking_a_commit_opens_its_state_and_a_call_opens_with_its_result(site, page, shots):
    page.go("#/graph")
    main = site.git("rev-parse", "refs/opal/heads/main").strip()
    page.one(f'.commit-row[data-oid="{main}"] .msg').click()
    page.wait_ready()
    assert page.page() == "state"
    log = site.json("log", "--turns", "main")
    info = page.one("#state-info")
    assert int(info.get_attribute("data-turns")) == len(log["turns"])
    assert info.get_attribute("data-id") == main
    rows = page.all(".turn")
    assert [int(r.get_attribute("data-turn")) for r in rows] == [t["turn"] for t in log["turns"]]
    by_turn = {t["turn"]: t for t in log["turns"]}
    for r in rows:
        n = int(r.get_attribute("data-turn"))
        assert r.find_element("css selector", ".role").text == (by_turn[n]["role"] or "")
        assert r.find_element("css selector", ".tool").text == (by_turn[n]["tool"] or "")
    # Open the Write call: its input, and the result a later turn holds, appear in it.
    write = next(t["turn"] for t in log["turns"] if t["tool"] == "Write")
    turn = page.one(f'.turn[data-turn="{write}"]')
    turn.find_element("css selector", ".expand").click()
    page.wait_for(f'.turn[data-turn="{write}"] .full .result')
    full = turn.find_element("css selector", ".full")
    call = full.find_element("css selector", ".call")
    result = full.find_element("css selector", ".result")
    assert "Write" in call.text and "A small SQLite cache for forecast responses." in call.text
    call_id = call.get_attribute("data-call")
    assert call_id and result.get_attribute("data-call") == call_id
    outputs = [b["output"] for n in range(write + 1, write + 4)
               for b in site.json("show", f"main:{n}")["blocks"] if b.get("call_id") == call_id]
    assert len(outputs) == 1 and outputs[0] in result.text
    page.screenshot(shots, "state")
    # Closing hides it again; nothing is fetched twice.
    turn.find_element("css selector", ".expand").click()
    assert not full.is_displayed()


def test_a_secret_is_shown_as_its_placeholder_and_never_in_clear(site, page):
    page.go("#/state/secrets")
    turn = page.one('.turn[data-turn="3"]')
    turn.find_element("css selector", ".expand").click()
    page.wait_for('.turn[data-turn="3"] .full .block')
    text = turn.find_element("css selector", ".full").text
    assert "aws_access_key_id = opal-secret:" in text
    html = page.driver.page_source
    assert SECRET not in html
    assert "opal-secret:" in html


def test_the_diff_shows_what_opal_diff_says_side_by_side(site, page, shots):
    page.go("#/diff/fork/main")
    cli = site.json("diff", "fork", "main")
    stat = page.one("#diff-stat")
    assert int(stat.get_attribute("data-added")) == cli["stat"]["turns_added"]
    assert int(stat.get_attribute("data-removed")) == cli["stat"]["turns_removed"]
    assert int(stat.get_attribute("data-changed")) == cli["stat"]["turns_changed"]
    assert int(stat.get_attribute("data-shared")) == cli["common_prefix_turns"] > 0
    entries = page.all(".entry")
    assert [e.get_attribute("class").split()[1] for e in entries] == [t["change"] for t in cli["turns"]]
    # The shared prefix is one collapsed line, not its turns.
    prefix = page.one(".shared-prefix")
    assert prefix.get_attribute("open") is None and f"{cli['common_prefix_turns']} shared turns" in prefix.text
    # Each side shows its own turn numbers; an added turn has nothing on side A.
    for e, t in zip(entries, cli["turns"]):
        if t["change"] == "added":
            assert e.find_element("css selector", ".side-a").text == ""
            assert e.find_element("css selector", ".side-b .num").text == str(t["turn_b"])
    page.screenshot(shots, "diff")


def test_the_diff_of_a_merge_stopped_on_a_conflict_marks_the_conflicting_turns(site, server, browser, shots,
                                                                               tmp_path_factory):
    from tests.cli.test_web import Web

    other = copy_site(site, tmp_path_factory.mktemp("conflict") / "site")
    for name, span, summary in (("c1", "HEAD:3..HEAD:4", "version one"), ("c2", "HEAD:3..HEAD:5", "version two")):
        other.run("branch", name, "main")
        other.run("switch", name)
        other.run("squash", span, "-m", summary)
    assert other.run("merge", "c1", ok=False).returncode == 1  # stopped on the conflict
    status = other.json("status")
    (conflict,) = status["merge"]["conflicts"]
    w = Web(other.project, env=other.env)
    try:
        browser.open(w.url)
        browser.go("#/diff")
        note = browser.one(".merge-note")
        assert "A merge of c1 into c2 stopped on 1 conflict" in note.text
        assert "opal merge --continue --take N=ours|theirs|both|base" in note.text
        # The page marks the entries whose turn is in the conflict, on either side.
        ours = {t["turn"] for t in conflict["ours"]}
        theirs = {t["turn"] for t in conflict["theirs"]}
        cli = other.json("diff", "c2", "c1")["turns"]  # ours (the current branch), then theirs
        want = [i for i, t in enumerate(cli) if t["turn_a"] in ours or t["turn_b"] in theirs]
        classes = browser.attr(".entry", "class")
        assert len(classes) == len(cli)
        assert [i for i, c in enumerate(classes) if "conflict" in c.split()] == want != []
        browser.screenshot(shots, "diff-conflict")
    finally:
        code, err = w.stop()
        browser.open(server.url)  # back to the module's server for the tests after this one
    assert code == 0, err


def test_the_budget_shows_opal_stats_figures_and_the_cuts_as_commands(site, server, page, shots):
    page.go("#/budget/main")
    stats = site.json("stats", "main")
    total = page.one("#budget-total")
    assert int(total.get_attribute("data-tokens")) == stats["tokens_estimate"]
    assert int(total.get_attribute("data-turns")) == stats["turns"]
    bars = page.all("svg#budget-chart rect.bar")
    assert sum(int(b.get_attribute("data-tokens")) for b in bars) == stats["tokens_estimate"]
    assert int(bars[0].get_attribute("data-first")) == 1 and int(bars[-1].get_attribute("data-last")) == stats["turns"]
    tools = {r.get_attribute("data-tool"): int(r.get_attribute("data-tokens"))
             for r in page.all("#by-tool tr[data-tool]")}
    assert tools == {k: v["tokens"] for k, v in stats["by_tool"].items()}
    biggest = [int(r.get_attribute("data-turn")) for r in page.all("#biggest tr[data-turn]")]
    assert biggest == [x["turn"] for x in stats["biggest"]]
    page.wait_for('#cuts[data-ready="1"]')  # the cuts come in a second request
    assert not page.all("#cuts .error")
    cuts = [c.text for c in page.all(".cut code.cmd")]
    api = server.api("cuts", rev="main")["cuts"]
    assert cuts == [c["command"] for c in api]
    assert [int(c.get_attribute("data-saves")) for c in page.all(".cut")] == [c["saves"] for c in api]
    assert cuts and all(c.startswith("opal ") for c in cuts)
    assert any(c.startswith("opal drop HEAD:") for c in cuts)
    page.screenshot(shots, "budget")
    # A bar is a link to its turns.
    bars[-1].click()
    page.wait_ready()
    assert page.page() == "state"


def test_blame_names_the_agent_turn_that_wrote_each_line(site, page, shots):
    page.go("#/blame?path=weatherctl/cache.py")
    cli = site.json("blame", "weatherctl/cache.py")
    rows = page.all("table#blame tr.line")
    assert [int(r.get_attribute("data-line")) for r in rows] == [line["line"] for line in cli["lines"]]
    agent_lines = [line for line in cli["lines"] if line["owner"]["kind"] == "agent"]
    assert agent_lines, "the demo session wrote this file"
    first = rows[agent_lines[0]["line"] - 1].find_element("css selector", ".owner.agent")
    assert f"claude turn {agent_lines[0]['owner']['turn']}" in first.text
    page.screenshot(shots, "blame")
    # The blame form takes another path.
    field = page.one("form#blame-form input[name=path]")
    field.clear()
    field.send_keys("README.md")
    page.driver.execute_script("document.body.dataset.ready = '0';")
    page.one("form#blame-form button").click()
    page.wait_ready()
    assert [int(x) for x in page.attr("table#blame tr.line", "data-line")] == [1, 2, 3]


def test_search_finds_what_opal_grep_all_finds(site, page, shots):
    page.go("#/search?q=SQLite")
    cli = site.json("grep", "--all", "SQLite")
    info = page.one("#search-info")
    assert int(info.get_attribute("data-count")) == len(cli["matches"]) > 0
    hits = page.all(".hit")
    assert [(h.get_attribute("data-rev"), h.get_attribute("data-turn")) for h in hits] == \
        [(m["rev"], str(m["turn"]) if m["turn"] is not None else "") for m in cli["matches"]]
    assert all(m.text == "SQLite" for m in page.all(".hit mark")[:20])
    page.screenshot(shots, "search")


def test_the_op_log_gives_each_operation_its_undo_command(site, page, shots):
    page.go("#/ops")
    cli = site.json("op", "log")["operations"]
    rows = page.all("tr.op")
    assert [r.get_attribute("data-op") for r in rows] == [o["id"] for o in cli]
    commands = [r.find_elements("css selector", "code.cmd") for r in rows]
    for o, cmd in zip(cli, commands):
        if o["command"] in ("init", "gc", "expired"):
            assert not cmd
        else:
            assert cmd[0].text == f"opal undo {o['id'][:10]}"
    page.screenshot(shots, "ops")


def test_every_request_the_browser_made_went_to_this_server(server, page):
    """Last in the file: every page above has been loaded by now."""
    sent = page.requests()
    # Chromium's own pages (chrome://, its new tab page before the first load) are not
    # the network; everything else must have gone to a server on 127.0.0.1 (this one, or
    # the one the conflict test started).
    network = [urllib.parse.urlsplit(r["url"]) for r in sent]
    network = [u for u in network if u.scheme not in ("chrome", "chrome-untrusted", "data", "about", "devtools")]
    assert {u.scheme for u in network} == {"http"}
    assert {u.hostname for u in network} == {"127.0.0.1"}
    mine = {u.path for u in network if u.port == server.port}
    assert {"/", "/static/app.js", "/static/app.css", "/api/graph"} <= mine
    assert not [e for e in page.console_errors() if "403" not in e], page.console_errors()


def test_screenshots_were_written(shots):
    names = sorted(os.path.splitext(n)[0] for n in os.listdir(shots) if n.endswith(".png"))
    assert {"graph", "state", "diff", "diff-conflict", "budget", "blame", "search", "ops"} <= set(names)
    for n in names:
        with open(os.path.join(shots, n + ".png"), "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
