"""``opal web`` as a process: the URL it prints, the token and Host gate, the headers
that keep a page on this machine, the JSON each page reads (checked against the
commands' own ``--json``), read-only, and stopping on Ctrl-C and SIGTERM.

The pages themselves are tested in a real browser (tests/web/).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.parse

import pytest

from tests.conftest import ROOT, git, opal

DEMO = os.path.join(ROOT, "opalgit", "demo_data", "claude-session.jsonl")
URL = re.compile(r"^opal web: (http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+))$")


class Web:
    """A real ``opal web`` subprocess in ``cwd``; stopped by its PID."""

    def __init__(self, cwd, *args: str, env: dict | None = None) -> None:
        # SIGINT as a terminal's foreground process has it: a test run started in the
        # background by a non-interactive shell inherits it ignored, which opal web
        # (like any Python program) keeps, and Ctrl-C could not be tested.
        self.proc = subprocess.Popen([sys.executable, "-m", "opalgit", "web", *args], cwd=str(cwd),
                                     env={**os.environ, **(env or {})},
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().rstrip("\n")  # the first line, printed before serving
        m = URL.match(line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"no URL line: {line!r} {self.proc.stderr.read()}")
        self.url, self.port, self.token = m.group(1), int(m.group(2)), m.group(3)

    def request(self, path: str, *, token: str | None = "", host: str | None = None, method: str = "GET",
                headers: dict | None = None) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = dict(headers or {})
        if token == "":
            token = self.token
        if token is not None:
            h["Authorization"] = f"token {token}"
        if host is not None:
            h["Host"] = host
        conn.request(method, path, headers=h)
        r = conn.getresponse()
        body = r.read()
        conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body

    def api(self, name: str, **params) -> dict:
        status, _, body = self.request(f"/api/{name}?{urllib.parse.urlencode(params)}")
        data = json.loads(body)
        assert status == 200, data
        return data

    def stop(self, sig=signal.SIGINT) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return self.proc.returncode, err


@pytest.fixture
def demo(project, home):
    """The bundled demo session (a real Claude Code session's shape) committed on main."""
    assert opal("init", cwd=project).returncode == 0
    r = opal("commit", "--file", DEMO, "-m", "whole session", cwd=project)
    assert r.returncode == 0, r.stderr
    return project


@pytest.fixture
def web(demo):
    w = Web(demo)
    yield w
    w.stop()


def _cli_json(cwd, *args: str) -> dict:
    r = opal(*args, "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_prints_a_loopback_url_with_a_token_and_listens_on_loopback_only(web):
    assert web.url.startswith("http://127.0.0.1:")
    assert len(web.token) >= 30  # 24 random bytes, URL-safe
    # Not reachable on any other address of this machine.
    addrs = {ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
    for addr in addrs:
        with pytest.raises(OSError):
            socket.create_connection((addr, web.port), timeout=2).close()


def test_no_token_or_a_wrong_one_is_refused_with_403_and_said(web):
    for path in ("/", "/api/state", "/static/app.js", "/api/graph"):
        assert web.request(path, token=None)[0] == 403
        assert web.request(path, token="x" * len(web.token))[0] == 403
    assert web.request("/?token=wrong", token=None)[0] == 403
    code, err = web.stop()
    assert code == 0
    assert "refused GET /api/state from 127.0.0.1: no valid token" in err


def test_a_host_header_naming_another_server_is_refused(web):
    # DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own Host.
    assert web.request("/api/refs", host=f"evil.example:{web.port}")[0] == 403
    assert web.request("/api/refs", host=f"localhost:{web.port}")[0] == 200
    assert web.request("/api/refs", host=f"127.0.0.1:{web.port}")[0] == 200


def test_the_url_token_becomes_a_strict_cookie_that_then_lets_requests_in(web):
    status, headers, _ = web.request(f"/?token={web.token}", token=None)
    assert status == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"opal-web-{web.port}={web.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    name_value = cookie.split(";")[0]
    status, headers, body = web.request("/", token=None, headers={"Cookie": name_value})
    assert status == 200 and b"/static/app.js" in body
    assert web.request("/api/refs", token=None, headers={"Cookie": f"opal-web-{web.port}=nope"})[0] == 403


def test_every_response_keeps_the_page_on_this_server(web):
    for path in ("/", "/static/app.js", "/static/app.css", "/api/refs"):
        status, headers, _ = web.request(path)
        assert status == 200, path
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "script-src 'self'" in csp
        assert headers["cache-control"] == "no-store"
        assert headers["x-content-type-options"] == "nosniff"


def test_the_page_names_no_address_outside_this_server():
    # Every asset is in the package: no CDN, no font service, no absolute URL.
    static = os.path.join(ROOT, "opalgit", "web", "static")
    for name in os.listdir(static):
        with open(os.path.join(static, name), encoding="utf-8") as fh:
            text = fh.read()
        urls = set(re.findall(r"https?://[^\s\"'<>)]+", text)) - {"http://www.w3.org/2000/svg"}
        assert not urls, (name, urls)


def test_read_only_every_method_but_get_is_refused(web, demo):
    before = git("for-each-ref", "refs/opal", cwd=str(demo)).stdout
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert web.request("/api/state", method=method)[0] == 405
    assert git("for-each-ref", "refs/opal", cwd=str(demo)).stdout == before


def test_unknown_paths_and_endpoints_are_404(web):
    assert web.request("/static/../server.py")[0] == 404
    assert web.request("/etc/passwd")[0] == 404
    status, _, body = web.request("/api/nope")
    assert status == 404 and b"no such endpoint" in body


def test_a_bad_revision_is_a_400_with_the_commands_message_and_hint(web):
    status, _, body = web.request("/api/state?rev=no-such-branch")
    data = json.loads(body)
    assert status == 400
    assert "no-such-branch" in data["error"]
    status, _, body = web.request("/api/state?from=zero")
    assert status == 400 and "not a number" in json.loads(body)["error"]


def test_state_pages_agree_with_opal_log_turns(web, demo):
    cli = _cli_json(demo, "log", "--turns")
    turns = [t for t in cli["turns"] if t["turn"] is not None] if isinstance(cli, dict) else \
        [t for t in cli if t["turn"] is not None]
    page = web.api("state", rev="HEAD", limit=7)
    assert page["turns"] == len(turns)
    assert [(r["turn"], r["role"], r["tool"], r["tokens_estimate"]) for r in page["items"]] == \
        [(t["turn"], t["role"], t["tool"], t["tokens_estimate"]) for t in turns[:7]]
    # A later page starts at its turn, however many bookkeeping records came before.
    later = web.api("state", rev="HEAD", **{"from": 30}, limit=5)
    assert [r["turn"] for r in later["items"]] == [30, 31, 32, 33, 34]
    assert [r["record"] for r in later["items"]] == [t["record"] for t in turns[29:34]]
    past = web.api("state", rev="HEAD", **{"from": len(turns) + 1})
    assert past["items"] == []


def test_an_opened_tool_call_comes_with_its_result(web, demo):
    page = web.api("state", rev="HEAD", limit=1000)
    call = next(r for r in page["items"] if r["calls"])
    full = web.api("turn", rev="HEAD", turn=call["turn"])
    shown = _cli_json(demo, "show", f"HEAD:{call['turn']}")
    assert full["blocks"] == shown["blocks"]
    assert {r["call_id"] for r in full["results"]} == set(call["calls"])
    result_turns = {r["turn"] for r in full["results"]}
    for n in result_turns:
        assert set(call["calls"]) & set(next(r for r in page["items"] if r["turn"] == n)["results"])
    assert full["open_calls"] == []


def test_diff_agrees_with_opal_diff(web, demo):
    assert opal("switch", "-c", "earlier", cwd=demo).returncode == 0
    assert opal("rewind", "5", cwd=demo).returncode == 0
    d = web.api("diff", a="main", b="earlier")
    cli = _cli_json(demo, "diff", "main", "earlier")
    assert d["stat"] == cli["stat"]
    assert d["common_prefix_turns"] == cli["common_prefix_turns"]
    assert [e["turn_a"] for e in d["entries"]] == [e["turn_a"] for e in cli["turns"]]
    assert d["merge"] is None


def test_search_agrees_with_opal_grep_all(web, demo):
    s = web.api("search", q="sqlite", i="1")
    cli = _cli_json(demo, "grep", "-i", "--all", "sqlite")
    assert s["count"] == len(cli["matches"]) > 0
    assert [(m["rev"], m["turn"]) for m in s["matches"]] == [(m["rev"], m["turn"]) for m in cli["matches"]]


def test_op_log_agrees_and_each_entry_has_its_undo_command(web, demo):
    ops = web.api("ops")["operations"]
    cli = _cli_json(demo, "op", "log")["operations"]
    assert [o["id"] for o in ops] == [o["id"] for o in cli]
    for o in ops:
        if o["command"] == "init":
            assert o["undo"] is None
        else:
            assert o["undo"] == f"opal undo {o['id'][:10]}"
    # The command shown does what it says: it takes the newest operation back.
    newest = ops[0]
    r = opal(*newest["undo"].split()[1:], cwd=demo)
    assert r.returncode == 0, r.stderr
    assert web.api("ops")["operations"][0]["undoes"] == newest["id"]


def test_a_page_sees_a_commit_made_while_it_runs(web, demo):
    before = web.api("state")["turns"]
    assert opal("rewind", "4", cwd=demo).returncode == 0
    assert web.api("state")["turns"] == before - 4


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_stop_it_cleanly(demo, sig):
    w = Web(demo)
    assert w.request("/api/refs")[0] == 200
    code, err = w.stop(sig)
    assert code == 0
    assert "opal web: stopped" in err
    assert "Traceback" not in err
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", w.port), timeout=2).close()


def test_a_port_in_use_is_one_error_with_a_hint(demo):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = opal("web", "--port", str(port), cwd=demo)
    assert r.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in r.stderr
    assert "--port 0" in r.stderr
    assert "Traceback" not in r.stderr


def test_outside_a_repository_it_says_so(tmp_path):
    r = opal("web", cwd=tmp_path)
    assert r.returncode != 0
    assert "opal" in r.stderr and "Traceback" not in r.stderr


def test_it_never_runs_in_the_command_server():
    from opalgit.server.client import LOCAL_COMMANDS

    assert ("web",) in LOCAL_COMMANDS


def test_a_request_that_fails_inside_is_a_500_said_on_the_terminal(demo, monkeypatch):
    # A bug in an endpoint: the page gets the message, the terminal one line, no traceback.
    from opalgit.web import api, server

    lines: list[str] = []
    srv = server.WebServer(os.path.join(str(demo), ".git"), 0, log=lines.append)
    monkeypatch.setitem(api.ENDPOINTS, "refs", lambda repo, params: 1 / 0)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("GET", "/api/refs", headers={"Authorization": f"token {srv.token}"})
        r = conn.getresponse()
        body = json.loads(r.read())
        assert r.status == 500
        assert body["error"].startswith("ZeroDivisionError")
        assert lines == ["opal web: /api/refs failed: ZeroDivisionError: division by zero"]
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)
