"""Regenerate the genuine Pi sessions under tests/fixtures/pi/generated/.

* ``two-turn.jsonl``: the harness's two-turn script (:func:`tests.clients.harness.generate_session`):
  a shell call and a read, then an edit (``edits[]``) and a write, each turn a run of the real Pi.
* ``branch.jsonl``: the same two turns, then a third run that moves Pi's leaf back to the
  answer of turn 1 with the ``/opal-branch`` extension command (``ctx.navigateTree``, what
  ``/tree`` does) and sends :data:`~tests.clients.drivers.pi.B_PROMPT`: the real client writes a
  second child of that answer, so the file's tree has two branches.
* ``compact.jsonl``: the two turns, then a run that compacts the session with the
  ``/opal-compact`` extension command (``ctx.compact``, what ``/compact`` does) and sends
  :data:`~tests.clients.drivers.pi.C_PROMPT`: a genuine ``compaction`` entry.
* ``structures/parallel/``: written by ``python -m tests.clients.regenerate pi`` (parallel calls).

Run from the repository root (needs scripts/install-agents.sh first)::

    python -m tests.clients.regenerate_pi && python -m tests.clients.regenerate pi

Each file is written with ``expected.json`` beside it naming the session, the project folder it
was made in and the history Pi sent the model last. It refuses to write a run that failed or
whose script did not fit the requests exactly.
"""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from pathlib import Path

from . import harness
from .drivers import pi
from .history import history_of

OUT = harness.REPO / "tests" / "fixtures" / "pi" / "generated"


def _answer_entry(path: Path, text: str) -> str:
    """The id of the assistant entry whose text is ``text``."""
    for line in path.read_text().splitlines():
        e = json.loads(line)
        msg = e.get("message") or {}
        if msg.get("role") == "assistant" and any(c.get("text") == text for c in msg.get("content") or []):
            return e["id"]
    raise SystemExit(f"{path}: no assistant entry says {text!r}")


def generate(kind: str) -> dict:
    root = harness.make_root(prefix="opal-gen-pi-")
    try:
        t1, t2 = pi.scripts(root.project)
        with harness.mock_for("pi", t1, lifetime=300) as srv:
            sid = str(uuid.uuid4())
            runs = [pi.run_pi(root, srv.port, harness.PROMPT1, session_id=sid, server=srv)]
            srv.add(*t2)
            runs.append(pi.run_pi(root, srv.port, harness.PROMPT2, resume=sid, server=srv))
            path = pi.pi_session_file(root, sid)
            if path is None or not all(r.ok for r in runs):
                raise SystemExit("pi failed:\n" + "\n".join(r.describe() for r in runs))
            if kind == "branch":
                runs.append(pi.make_branch(root, srv, sid, _answer_entry(path, harness.ANSWER1)))
            elif kind == "compact":
                runs.append(pi.make_compaction(root, srv, sid))
            if not all(r.ok for r in runs) or srv.remaining or srv.exhausted or srv.errors:
                raise SystemExit(f"pi: the run failed or the script did not fit ({srv.remaining} left, "
                                 f"{srv.exhausted} unanswered, {srv.errors})\n" + "\n".join(r.describe() for r in runs))
        name = f"{kind}.jsonl"
        OUT.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, OUT / name)
        last = srv.model_requests[-1]
        return {"file": name, "client": "pi", "version": harness.PINNED["pi"][1], "session_id": sid,
                "project": str(root.project), "runs": len(runs), "model_requests": len(srv.model_requests),
                "history": [list(i) for i in history_of(last.body, "pi")]}
    finally:
        root.cleanup()


def main(argv: list[str]) -> int:
    reason = harness.missing_reason("pi")
    if reason:
        print(f"pi: skipped: {reason}", file=sys.stderr)
        return 1
    expected = [generate(kind) for kind in ("two-turn", "branch", "compact")]
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
    for e in expected:
        print(f"{e['file']}: {e['runs']} runs, {e['model_requests']} model requests")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
