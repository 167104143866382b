"""Regenerate the genuine GitHub Copilot CLI sessions under tests/fixtures/copilot/generated/.

Two sessions, each driven through the real, pinned ``copilot`` against the scripted
chat-completions mock: ``two-turn`` (the harness's two-turn script: a shell call and a
read, then an edit and a write) and ``parallel`` (the parallel-calls scenario: replies
with three, then two, tool calls at once). What the client wrote is copied in as it is:
the whole session folder ``<uuid>/`` (``events.jsonl``, ``workspace.yaml``,
``checkpoints/``, ``rewind-file-snapshots/``; not the empty ``*.lock`` files of the
running client), beside ``expected.json``: the client, its version, the prompts, and
the history the client itself sent the model in its last request (``history_of``).

Run from the repository root (needs scripts/install-agents.sh first)::

    python -m tests.clients.copilot_fixtures            # both
    python -m tests.clients.copilot_fixtures parallel

It refuses to write a session whose run failed or whose script did not fit exactly.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from . import harness
from .history import history_of

OUT = harness.REPO / "tests" / "fixtures" / "copilot" / "generated"
NAMES = ("two-turn", "parallel")


def _turns(name: str, proj: Path) -> list[harness.Turn]:
    if name == "two-turn":
        t1, t2 = harness._scripts("copilot", proj)
        return [harness.Turn(harness.PROMPT1, t1), harness.Turn(harness.PROMPT2, t2)]
    return harness._parallel_turns("copilot", proj)


def generate(name: str) -> Path:
    root = harness.make_root(prefix=f"opal-gen-copilot-{name}-")
    sc = harness.Scenario(name, "copilot", _turns(name, root.project))
    run = harness.run_scenario(sc, root)
    try:
        if not run.ok:
            raise SystemExit(f"copilot:{name}: the client failed\n{run.describe()}")
        if run.server.remaining or run.server.exhausted:
            raise SystemExit(f"copilot:{name}: the script did not fit: {run.server.remaining} replies left, "
                             f"{run.server.exhausted} requests without one\n{run.describe()}")
        out = OUT / name
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        shutil.copytree(run.path.parent, out / run.session_id, ignore=shutil.ignore_patterns("*.lock"))
        last = run.server.model_requests[-1]
        history = history_of(last.body, "copilot")
        expected = {
            "client": "copilot",
            "version": harness.PINNED["copilot"][1],
            "scenario": name,
            "session_id": run.session_id,
            "file": f"{run.session_id}/events.jsonl",
            "project": str(run.root.project),
            "prompts": [t.prompt for t in sc.turns],
            "model_requests": len(run.server.model_requests),
            "final_answer": last.reply.text if last.reply is not None else None,
            "history": [list(i) for i in history],
            "call_ids": [i.call_id for i in history if i[0] == "tool_call"],
        }
        (out / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
        print(f"copilot:{name}: {run.session_id}/events.jsonl ({run.path.stat().st_size} bytes, "
              f"{len(run.server.model_requests)} model requests)")
        return out
    finally:
        run.root.cleanup()


def main(argv: list[str]) -> int:
    reason = harness.missing_reason("copilot")
    if reason:
        print(f"copilot: skipped: {reason}", file=sys.stderr)
        return 1
    for name in argv or NAMES:
        if name not in NAMES:
            print(f"unknown session {name!r}; expected one of {', '.join(NAMES)}", file=sys.stderr)
            return 2
        generate(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
