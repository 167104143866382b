"""The handoff benchmark (issue 21, row ``peers.handoff``): the whole handoff a user makes
when an agent hits its limit, a 20 MB Claude Code session resumed in Codex, against
``hc convert`` of the same file in the same run.

The user's way, as typed in the project folder (a git repository without opal; its
``git init`` is not timed): ``opal init``, ``opal commit``, ``opal export --to codex``,
each a process of its own; the figure is the three added up, run after run. hc reads
the same file from the same ``~/.claude/projects/<folder key>/`` and writes its
rollout under the same ``~/.codex/sessions/``. The two take turns (see
``Bench.bench_import`` on why), and each run starts from a fresh repository and an
empty ``~/.codex``. The informative row ``peers.handoff.one`` times the same handoff
as the one command ``opal handoff --to codex``, also taking turns with hc.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from typing import TYPE_CHECKING

from . import generate as gen
from .util import Row, hermetic_env, median, run

if TYPE_CHECKING:
    from .suite import Bench

MB = 1 << 20
#: The session size of the issue's handoff; --quick uses a small one (no timing claims).
HANDOFF_SIZE = 20 * MB
QUICK_SIZE = 512 * 1024
#: The target: the whole handoff in at most this many times hc's conversion.
TARGET = 1.5
STEPS = (("init",), ("commit",), ("export", "--to", "codex"))


def bench_handoff(b: "Bench") -> None:
    from .suite import _codex_calls, _install_hc

    size = QUICK_SIZE if b.cfg.quick else HANDOFF_SIZE
    hc, why = _install_hc(b)
    if hc is None:
        b.na("peers.handoff", "opal init + commit + export --to codex vs hc convert", why)
        return
    home = os.path.join(b.work, "handoff-home")
    shutil.rmtree(home, ignore_errors=True)
    env = hermetic_env(home)
    # The compiled modules the warm-up cached (a fresh cache would time compiling opal).
    env["PYTHONPYCACHEPREFIX"] = b.env["PYTHONPYCACHEPREFIX"]
    project = os.path.join(b.work, "handoff-project")
    os.makedirs(project, exist_ok=True)
    st = _session(b, project, size)
    folder = os.path.join(home, ".claude", "projects", re.sub(r"[^A-Za-z0-9]", "-", project))
    os.makedirs(folder, exist_ok=True)
    shutil.copyfile(st.path, os.path.join(folder, os.path.basename(st.path)))
    codex_home = os.path.join(home, ".codex")
    hc_argv = [hc, "convert", "--from", "claude", "--to", "codex", "--cwd", project, "--no-interactive", "-y",
               st.session_id]

    steps: dict[str, list[float]] = {s[0]: [] for s in STEPS}
    walls, cpus, one_walls, one_cpus, hc_walls, hc_cpus, hc_one = [], [], [], [], [], [], []
    opal_file = hc_file = one_file = None
    for _ in range(b.cfg.runs):
        _fresh(b, project, codex_home, env)
        wall = cpu = 0.0
        for argv in STEPS:
            p = b.opal(*argv, cwd=project, env=env).check()
            steps[argv[0]].append(p.wall)
            wall += p.wall
            cpu += p.cpu
        walls.append(wall)
        cpus.append(cpu)
        opal_file = _rollout(codex_home, "opal.jsonl")
        p = _hc(hc_argv, project, codex_home, env)
        hc_walls.append(p.wall)
        hc_cpus.append(p.cpu)
        hc_file = _rollout(codex_home, "hc.jsonl")
        # The one command, taking turns with hc likewise.
        _fresh(b, project, codex_home, env)
        p = b.opal("handoff", "--to", "codex", "--json", cwd=project, env=env).check()
        one_walls.append(p.wall)
        one_cpus.append(p.cpu)
        one_file = _rollout(codex_home, "opal-handoff.jsonl")
        hc_one.append(_hc(hc_argv, project, codex_home, env).wall)
    assert opal_file and one_file
    same = _same_rollout(opal_file, one_file)
    opal_calls = _codex_calls(opal_file)
    hc_calls = _codex_calls(hc_file) if hc_file else {}
    split = ", ".join(f"{k} {median(v):.2f} s" for k, v in steps.items())
    b.row(Row("peers.handoff", f"opal init + commit + export --to codex, {st.bytes / MB:.1f} MB Claude session, "
                               "fresh repository", median(walls), "s", median(hc_walls), "hc convert claude -> codex",
              target=None if b.cfg.quick else TARGET,
              note=f"{split}; cpu {median(cpus):.2f} s vs hc {median(hc_cpus):.2f} s; "
                   f"tool calls kept: opal {opal_calls.get('calls', 0)}, hc {hc_calls.get('calls', 0)}",
              extra={"runs_wall": walls, "runs_cpu": cpus, "baseline_wall": hc_walls, "baseline_cpu": hc_cpus,
                     "steps_wall": steps, "file_bytes": st.bytes, "opal": opal_calls, "hc": hc_calls}))
    b.row(Row("peers.handoff.one", "opal handoff --to codex (the same handoff, one command)", median(one_walls), "s",
              median(hc_one), "hc convert claude -> codex",
              note=f"cpu {median(one_cpus):.2f} s; rollout identical to the three commands': {same}",
              extra={"runs_wall": one_walls, "runs_cpu": one_cpus, "baseline_wall": hc_one, "same_rollout": same}))
    if not same:
        raise RuntimeError(f"opal handoff wrote another rollout than init + commit + export: {one_file} vs {opal_file}")


def _session(b: "Bench", project: str, size: int) -> gen.Stats:
    """A Claude session made in ``project`` (its records' ``cwd``), cached by size and folder."""
    key = hashlib.sha256(project.encode()).hexdigest()[:10]
    folder = os.path.join(b.work, "sessions", f"handoff-{size}-{key}")
    meta = os.path.join(folder, "stats.json")
    if os.path.exists(meta):
        with open(meta) as fh:
            d = json.load(fh)
        d["marks"] = {int(k): v for k, v in d["marks"].items()}
        return gen.Stats(**d)
    os.makedirs(folder, exist_ok=True)
    sid = gen.session_id_for("claude", 21)
    st = gen.generate("claude", os.path.join(folder, gen.default_name("claude", sid)), size=size, seed=21, cwd=project)
    with open(meta, "w") as fh:
        json.dump(st.to_json(), fh)
    b.log(f"  generated the handoff session: {st.bytes / MB:.1f} MB, {st.turns} turns, {st.tool_calls} tool calls")
    return st


def _fresh(b: "Bench", project: str, codex_home: str, env: dict) -> None:
    """The project as a user has it before the handoff: a git repository without opal, no Codex sessions."""
    shutil.rmtree(os.path.join(project, ".git"), ignore_errors=True)
    shutil.rmtree(codex_home, ignore_errors=True)
    b.git("init", "-q", cwd=project, env=env).check()


def _hc(argv: list[str], project: str, codex_home: str, env: dict):
    shutil.rmtree(os.path.join(codex_home, "sessions"), ignore_errors=True)
    return run(argv, cwd=project, env=env).check()


def _rollout(codex_home: str, name: str) -> str | None:
    """The rollout just written under ``codex_home``, moved aside (as ``name``) so the next writer starts empty."""
    sessions = os.path.join(codex_home, "sessions")
    found = [os.path.join(d, f) for d, _, fs in os.walk(sessions) for f in fs if f.endswith(".jsonl")]
    if not found:
        return None
    kept = os.path.join(os.path.dirname(codex_home), "rollouts", name)
    os.makedirs(os.path.dirname(kept), exist_ok=True)
    shutil.move(max(found, key=os.path.getmtime), kept)
    return kept


def _same_rollout(a: str, b: str) -> bool:
    """Whether two opal exports of the same state are the same rollout, but for what
    each export draws afresh: the session id (and the turn ids made from it) and the
    time it was written."""
    return _comparable(a) == _comparable(b)


def _comparable(path: str) -> bytes:
    """A rollout with its session id, the turn ids made from it and the export's time
    (its first line's, also given to lines of no time of their own) replaced."""
    with open(path, "rb") as fh:
        data = fh.read()
    meta = json.loads(data.split(b"\n", 1)[0])
    tid, now = meta["payload"]["id"].encode(), meta["timestamp"].encode()
    data = data.replace(tid, b"<id>").replace(now, b"<now>")
    return re.sub(rb'"turn_id":"[0-9a-f-]{36}"', b'"turn_id":"<turn>"', data)
