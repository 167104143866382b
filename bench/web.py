"""The ``web`` benchmark (issue 23): how soon ``opal web``'s pages are drawn in a real
headless Chromium (bench/browser.py), each against the terminal command a user would
type instead, measured in the same run.

* ``web.state``: the state page of a ``read_turns``-turn state (100,000; a lean Claude
  Code session committed whole), from the start of the page load to the page drawn
  (the page's own ``performance.now()`` when it marks itself ready), for its first,
  middle and last page of 200 turns; the figure is the slowest of the three medians,
  held to under a second (the issue's bound; the ratio is informative).
  Baseline: ``opal show main:MIDDLE``, the terminal's cheapest read of the same state
  (a process: start-up, resolve, one turn).
* ``web.graph``: the graph page of a ``web_commits``-commit history (1,000: a line of
  commits with a fork every hundred), against ``opal log --graph --all --oneline``.

The server is a real ``opal web`` process, started once and stopped by its PID; the
browser's first load of each page (a cold cache) is left out of the medians.
Without Chromium and chromedriver both rows are ``n/a`` and say what to install.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from typing import TYPE_CHECKING

from .util import Row, median, run

if TYPE_CHECKING:
    from .suite import Bench

URL = re.compile(r"^opal web: (http://127\.0\.0\.1:\d+/\?token=\S+)$")

# The graph history's builder, run by the bench's own interpreter in the bench's
# environment: 1,000 commits through 1,000 processes would take minutes, and the
# history is the input here, not the figure. argv: repo, session file, commits, forks.
_BUILD = r"""
import os, sys
from opalgit import porcelain
from opalgit.porcelain.branch import branch_create
from opalgit.store.repo import Repository
path, source, n, forks = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lines = open(source, "rb").read().splitlines(keepends=True)
step = max(1, len(lines) // (n + forks + 1))
repo = Repository.discover(path)
live = os.path.join(path, ".git", "bench-live.jsonl")
side = os.path.join(path, ".git", "bench-side.jsonl")
open(live, "wb").close()
every = max(1, n // max(1, forks))
made = 0
for i in range(n):
    with open(live, "ab") as fh:
        fh.writelines(lines[i * step:(i + 1) * step])
    porcelain.commit(repo, os.environ, path, file=live, message=f"step {i}")
    made += 1
    if forks and i % every == every // 2:
        name = f"side-{i}"
        branch_create(repo, name, "main")
        with open(live, "rb") as a, open(side, "wb") as b:
            b.write(a.read())
            b.writelines(lines[(n + 1) * step:(n + 2) * step])
        porcelain.commit(repo, os.environ, path, file=side, message=f"side {i}", branch=name)
        made += 1
print(made)
"""


class _Web:
    """A real ``opal web`` process for ``repo``; stopped by its PID."""

    def __init__(self, b: "Bench", repo: str) -> None:
        self.proc = subprocess.Popen([*b.opal_cmd, "web", "--no-open"], cwd=repo, env=b.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()
        m = URL.match(line)
        if not m:
            self.stop()
            raise RuntimeError(f"opal web printed no URL: {line!r}")
        self.url = m.group(1)
        self.base = self.url.split("?")[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            # SIGTERM, not SIGINT: a bench started in the background by a shell runs
            # with SIGINT ignored, and opal web keeps it so.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _load(browser, url: str) -> float:
    """Seconds from the start of loading ``url`` to the page drawn (a full page load:
    about:blank first, so that a change of hash alone is not mistaken for one)."""
    browser.driver.get("about:blank")
    took = browser.open(url)
    if browser.error():
        raise RuntimeError(f"{url}: the page says {browser.error()!r}")
    return took


def _times(browser, url: str, runs: int) -> list[float]:
    _load(browser, url)  # the first load warms the browser's cache of the page's files
    return [_load(browser, url) for _ in range(runs)]


def bench_web(b: "Bench") -> None:
    from .browser import Browser, missing

    why = missing()
    if why:
        for rid, title in (("web.state", "opal web: state page"), ("web.graph", "opal web: graph page")):
            b.row(Row(rid, title, status="n/a", note=why))
        return
    cfg = b.cfg
    runs = max(cfg.runs, 3 if not cfg.quick else 1)
    st = b.session("claude", turns=cfg.read_turns, seed=4, profile="lean")
    state_repo = b.fresh_repo("web-state")
    t = time.perf_counter()
    b.opal("commit", "--file", st.path, cwd=state_repo).check()
    build_state = time.perf_counter() - t

    graph_repo = b.fresh_repo("web-graph")
    src = b.session("claude", turns=max(2 * cfg.web_commits, 200), seed=6, profile="lean")
    forks = max(1, cfg.web_commits // 100)
    t = time.perf_counter()
    built = run([b.python, "-c", _BUILD, graph_repo, src.path, str(cfg.web_commits), str(forks)],
                cwd=graph_repo, env=b.env).check()
    made = int(built.out.split()[-1])
    build_graph = time.perf_counter() - t
    commits = len(b.opal("log", "--all", "--format=%H", cwd=graph_repo).check().out.split())

    profile = b.path("web", "chromium-profile")
    browser = Browser(profile)
    servers: list[_Web] = []
    try:
        web = _Web(b, state_repo)
        servers.append(web)
        browser.open(web.url)  # trades the token for the cookie
        turns = cfg.read_turns
        middle = turns // 2 - (turns // 2 - 1) % 200
        last = turns - (turns - 1) % 200
        pages = {"first": 1, "middle": middle, "last": last}
        timed = {name: _times(browser, f"{web.base}#/state/main?from={at}", runs) for name, at in pages.items()}
        shows = [b.opal("show", f"main:{turns // 2}", cwd=state_repo).check() for _ in range(runs)]
        slowest = max(median(v) for v in timed.values())
        b.row(Row("web.state", f"opal web: state page of a {turns:,}-turn state in Chromium (slowest of first, "
                               f"middle, last page), vs opal show main:{turns // 2}",
                  slowest, "s", median([p.wall for p in shows]), f"opal show main:{turns // 2}",
                  target=1.0, target_on="value",  # the bound: a 100,000-turn state opens in under 1 s
                  note=", ".join(f"{k} page {median(v) * 1000:.0f} ms" for k, v in timed.items())
                       + f"; the state committed in {build_state:.1f} s ({st.bytes / (1 << 20):.0f} MB session)",
                  extra={"pages_s": timed, "show_wall": [p.wall for p in shows], "turns": turns}))

        gweb = _Web(b, graph_repo)
        servers.append(gweb)
        browser.open(gweb.url)
        graph = _times(browser, f"{gweb.base}#/graph", runs)
        nodes = browser.driver.execute_script("return document.querySelectorAll('circle.node').length")
        logs = [b.opal("log", "--graph", "--all", "--oneline", cwd=graph_repo).check() for _ in range(runs)]
        b.row(Row("web.graph", f"opal web: graph page of {commits:,} commits ({forks} forks) in Chromium, "
                               "vs opal log --graph --all --oneline",
                  median(graph), "s", median([p.wall for p in logs]), "opal log --graph --all --oneline",
                  note=f"{nodes} nodes drawn; {made} commits built in {build_graph:.1f} s",
                  extra={"runs_s": graph, "log_wall": [p.wall for p in logs], "commits": commits, "nodes": nodes}))
    finally:
        browser.quit()
        for s in servers:
            s.stop()
    shutil.rmtree(state_repo)
    shutil.rmtree(graph_repo)
    shutil.rmtree(os.path.dirname(profile), ignore_errors=True)
