"""Benchmark row ``capture``: the time opal's capture hook adds to each agent turn.

The agent waits for its hook from spawning it (``sh -c COMMAND``, the event on stdin)
until it exits; that is what a turn is longer by. Measured against a no-op hook the
agent would spawn the same way (``sh -c 'cat >/dev/null'``), taking turns, each hooked
run after one more turn was appended to a genuine-shaped Claude session, and with the
worker of the turn before done (``capture.work`` says how long that took: nobody waits
for it). ``capture.compact``: how long the hook holds the agent before a compaction,
where it waits until the turns are committed (docs/capture.md).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from statistics import median

from bench import generate as gen
from bench.util import Row, run

#: Seconds a hook may add to a turn (issue 22).
TARGET = 0.100
BOUND = 120.0


def _idle(opal_dir: str) -> bool:
    cap = os.path.join(opal_dir, "capture")
    queue = os.path.join(cap, "queue")
    if os.path.isdir(queue) and any(n.endswith(".json") and not n.startswith(".") for n in os.listdir(queue)):
        return False
    lock = os.path.join(cap, "worker.lock")
    if not os.path.exists(lock):
        return True
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
    return True


def _drain(opal_dir: str) -> float:
    t = time.perf_counter()
    while not _idle(opal_dir):
        if time.perf_counter() - t > BOUND:
            raise RuntimeError(f"the capture worker in {opal_dir} was not done within {BOUND:.0f} s")
        time.sleep(0.005)
    return time.perf_counter() - t


def bench_capture(suite) -> None:
    n = max(suite.cfg.runs * 2, 5) if not suite.cfg.quick else 3
    repo = suite.fresh_repo("capture")
    opal_dir = os.path.join(repo, ".git", "opal")
    suite.opal("capture", "install", "--agent", "claude", cwd=repo).check()
    with open(os.path.join(repo, ".claude", "settings.json")) as fh:
        hooks = json.load(fh)["hooks"]
    command, compact_command = (hooks[ev][-1]["hooks"][0]["command"] for ev in ("Stop", "PreCompact"))
    sid = gen.session_id_for("claude", 5)
    src = os.path.join(suite.work, "capture", gen.default_name("claude", sid))
    os.makedirs(os.path.dirname(src), exist_ok=True)
    st = gen.generate("claude", src, turns=n + 3, seed=5, marks=tuple(range(2, n + 3)))
    with open(src, "rb") as fh:
        data = fh.read()
    session = os.path.join(suite.work, "capture", "live", os.path.basename(src))
    os.makedirs(os.path.dirname(session), exist_ok=True)

    def event(name: str) -> bytes:
        return json.dumps({"session_id": st.session_id, "transcript_path": session, "cwd": repo,
                           "hook_event_name": name}).encode()

    noop, hooked, work = [], [], []
    for i in range(n):
        with open(session, "wb") as fh:
            fh.write(data[: st.marks[i + 2]])  # the agent wrote one more turn
        noop.append(run(["sh", "-c", "cat >/dev/null"], cwd=repo, env=suite.env, stdin=event("Stop")).check().wall)
        p = run(["sh", "-c", command], cwd=repo, env=suite.env, stdin=event("Stop")).check()
        hooked.append(p.wall)
        work.append(p.wall + _drain(opal_dir))
    with open(session, "wb") as fh:
        fh.write(data)
    compact = run(["sh", "-c", compact_command], cwd=repo, env=suite.env, stdin=event("PreCompact")).check().wall
    log_path = os.path.join(opal_dir, "capture", "log")
    with open(log_path) as fh:
        entries = [json.loads(line) for line in fh]
    errors = [e for e in entries if e.get("level") == "error"]
    captured = sum(1 for e in entries if e.get("level") == "info")
    added = median(hooked) - median(noop)
    suite.row(Row("capture", "time opal's capture hook adds to an agent turn (hook spawn to exit)", added, "s",
                  median(noop), "a no-op hook (sh -c 'cat >/dev/null')", target=TARGET, target_on="value",
                  note=f"hook {median(hooked) * 1000:.0f} ms, no-op hook {median(noop) * 1000:.0f} ms, {n} turns; "
                       f"the commit runs in the background ({median(work) * 1000:.0f} ms until done, row capture.work); "
                       f"{captured} captures logged, {len(errors)} errors",
                  extra={"hooked_wall": hooked, "noop_wall": noop, "work_wall": work, "errors": len(errors)}))
    suite.row(Row("capture.work", "the same: from the hook's spawn until its turn is committed in the background",
                  median(work), "s", median(noop), "a no-op hook",
                  note="informative: the agent does not wait for it", extra={"work_wall": work}))
    suite.row(Row("capture.compact", "time the hook holds the agent before a compaction (waits for the commit)",
                  compact, "s", median(noop), "a no-op hook",
                  note="informative: the agent's limit for opal's hook is 30 s; the hook waits 20 s at most"))
    if errors:
        raise RuntimeError(f"capture errors: {errors[-1].get('message')}")
    shutil.rmtree(repo)
