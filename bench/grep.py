"""The ``grep`` benchmark (issue 22): ``opal grep`` over the 100,000-turn history, against ``rg``.

The history is the read benchmark's: a lean Claude Code session of ``read_turns`` turns,
committed in ``read_commits`` steps, plus a branch ten turns short of main that shares all
but its last leaf. Three figures, each a median of runs taking turns:

* ``grep``: ``opal grep PATTERN`` over main's state, against ``rg PATTERN FILE`` over the raw
  session file, the peer a user would reach for (it searches JSON text, escapes and all, and
  does not know a prompt from a tool output);
* ``grep.all``: ``opal grep PATTERN --all`` (two states, one history), against ``opal grep``
  of main alone: shared records are searched once, so the ratio is near 1, not 2;
* ``opal --version`` beside each, the floor of any opal command (start-up).

The pattern is one a user greps a session for (``Traceback|FAILED``); the row says how many
lines each tool printed.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import TYPE_CHECKING

from .util import Row, median, run

if TYPE_CHECKING:
    from .suite import Bench

PATTERN = "Traceback|FAILED"


def bench_grep(b: "Bench") -> None:
    cfg = b.cfg
    rg = shutil.which("rg")
    st = b.session("claude", turns=cfg.read_turns, seed=4, profile="lean")
    repo = b.fresh_repo("grep")
    from .suite import _copy_range, _line_cuts

    live = b.path("grep", os.path.basename(st.path))
    prev = 0
    res: dict = {}
    for cut in _line_cuts(st.path, cfg.read_commits):
        _copy_range(st.path, live, prev, cut, append=prev > 0)
        prev = cut
        res = json.loads(b.opal("commit", "--file", live, "--json", cwd=repo).check().out)
    turns = res["turns"]
    b.opal("branch", "side", f"main:{turns - 10}", cwd=repo).check()

    runs = max(cfg.runs, 3 if not cfg.quick else 1)
    mains, alls, floors, peers = [], [], [], []
    for _ in range(runs):  # taking turns, so that a busy moment falls on all of them alike
        mains.append(b.opal("grep", PATTERN, cwd=repo))
        alls.append(b.opal("grep", PATTERN, "--all", cwd=repo))
        floors.append(b.opal("--version", cwd=repo).check())
        if rg:
            peers.append(run([rg, "--no-config", PATTERN, st.path], cwd=repo, env=b.env))
    for p in mains + alls:
        if p.rc not in (0, 1):  # 1: nothing matched, as git grep
            p.check()
    searched = json.loads(b.opal("grep", PATTERN, "--all", "--json", cwd=repo).out or "{}").get("searched", {})
    lines = len(mains[0].out.splitlines())
    wall = median([p.wall for p in mains])
    note = (f"opal printed {lines} lines, cpu {median([p.cpu for p in mains]) * 1000:.0f} ms; "
            f"opal --version {median([f.wall for f in floors]):.3f} s")
    if rg:
        b.row(Row("grep", f"opal grep '{PATTERN}', {turns:,}-turn history, vs rg over the session file", wall, "s",
                  median([p.wall for p in peers]), "rg over the raw session file",
                  note=note + f"; rg printed {len(peers[0].out.splitlines())} lines ({st.bytes / (1 << 20):.0f} MB)",
                  extra={"runs_wall": [p.wall for p in mains], "rg_wall": [p.wall for p in peers],
                         "floor_wall": [f.wall for f in floors], "turns": turns}))
    else:
        b.row(Row("grep", f"opal grep '{PATTERN}', {turns:,}-turn history (rg not installed)", wall, "s",
                  median([f.wall for f in floors]), "opal --version",
                  note=note + "; rg is not installed (apt-get install ripgrep), so the floor is the baseline"))
    b.row(Row("grep.all", f"opal grep --all: main and a branch sharing all but 10 turns, vs main alone",
              median([p.wall for p in alls]), "s", wall, "opal grep of main alone",
              note=f"searched: {searched}", extra={"runs_wall": [p.wall for p in alls], "searched": searched}))
    shutil.rmtree(repo)
