"""Regenerate the genuine structured sessions under tests/fixtures/<agent>/generated/structures/.

Each scenario of :func:`tests.clients.harness.scenarios` (parallel tool calls,
a Claude subagent, a compaction) is driven through the real, pinned client
against its scripted mock. What the client wrote is copied in as it is (the
session file, and for Claude the ``<session>/`` side folder with
``subagents/``), beside ``expected.json``: the client, its version, the
scenario, and the history the client itself sent the model in its last
request (``history_of``), which the resume tests compare against.

Run from the repository root (needs scripts/install-agents.sh first)::

    python -m tests.clients.regenerate            # every client and scenario
    python -m tests.clients.regenerate claude:subagent codex

It refuses to write a scenario whose run failed or whose script did not fit
exactly (a reply left over, or a request the script had no reply for).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from . import harness
from .history import history_of

FIXTURES = harness.REPO / "tests" / "fixtures"


def target_dir(client: str, scenario: str) -> Path:
    return FIXTURES / client / "generated" / "structures" / scenario


def _final_text(run: harness.ScenarioRun) -> str | None:
    last = run.server.model_requests[-1].reply if run.server.model_requests else None
    return last.text if last is not None else None


def generate(client: str, name: str) -> Path:
    proj_probe = harness.make_root(prefix=f"opal-gen-{client}-{name}-")
    sc = next(s for s in harness.scenarios(client, proj_probe.project) if s.name == name)
    run = harness.run_scenario(sc, proj_probe)
    try:
        if not run.ok:
            raise SystemExit(f"{client}:{name}: the client failed\n{run.describe()}")
        if run.server.remaining or run.server.exhausted:
            raise SystemExit(f"{client}:{name}: the script did not fit: {run.server.remaining} replies left, "
                             f"{run.server.exhausted} requests without one\n{run.describe()}")
        out = target_dir(client, name)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        shutil.copy2(run.path, out / run.path.name)
        side = run.path.with_suffix("")
        if client == "claude" and side.is_dir():
            shutil.copytree(side, out / side.name)
        last = run.server.model_requests[-1]
        history = history_of(last.body, client)
        expected = {
            "client": client,
            "version": harness.PINNED[client][1],
            "scenario": name,
            "note": sc.note,
            "session_id": run.session_id,
            "file": run.path.name,
            "project": str(run.root.project),
            "prompts": [t.prompt for t in sc.turns],
            "model_requests": len(run.server.model_requests),
            "final_answer": _final_text(run),
            "history": [list(i) for i in history],
            # the id of each tool_call in ``history``, in order (results carry theirs)
            "call_ids": [i.call_id for i in history if i[0] == "tool_call"],
        }
        (out / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n")
        print(f"{client}:{name}: {run.path.name} ({run.path.stat().st_size} bytes, "
              f"{len(run.server.model_requests)} model requests)")
        return out
    finally:
        run.root.cleanup()


_README = """# Genuine {client} sessions with {what}

Written by the real, pinned client (`{client}` {version}, installed by `scripts/install-agents.sh`)
running offline against the scripted mock model server in `tests/clients/mockservers.py`. The
scripts are the scenarios of `tests.clients.harness.scenarios("{client}", ...)`: each turn is one
client run (the first a new session, the others `--resume`), and each mock reply may carry several
tool calls at once (several `tool_use` blocks / `function_call` items / `functionCall` parts).

Nothing in these files is edited by hand. Each folder holds what the client wrote (for Claude
also the `<session>/` side folder with `subagents/agent-*.jsonl` and `.meta.json`) and
`expected.json`: the client, its version, the prompts, the final answer, and `history`, the
conversation the client itself sent the model in its last request
(`tests.clients.history.history_of`; `call_ids` names each call's id), which `tests/clients/test_structured_sessions.py` compares
a resumed export against.

| file | client | made by the script | bytes | model requests |
|---|---|---|---|---|
{rows}

Regenerate (all clients, or `{client}`, or `{client}:parallel`); it refuses to write a scenario
whose client run failed or whose script did not fit the requests exactly, and rewrites this file:

    scripts/regenerate-client-sessions.sh [client[:scenario] ...]

The paths inside name the temporary folders the sessions were made in (`/tmp/opal-gen-...`);
the tests export with `--cwd` to a fresh folder, as a user moving a session would.
"""


def write_readme(client: str) -> None:
    """The folder's README: which client version and which script made each file."""
    base = FIXTURES / client / "generated" / "structures"
    rows = []
    for exp_file in sorted(base.glob("*/expected.json")):
        e = json.loads(exp_file.read_text())
        size = (exp_file.parent / e["file"]).stat().st_size
        rows.append(f"| `{exp_file.parent.name}/{e['file']}` | {e['client']} {e['version']} | {e['note']} "
                    f"| {size} | {e['model_requests']} |")
    what = "parallel calls, a subagent and a compaction" if client == "claude" else "parallel calls and a compaction"
    (base / "README.md").write_text(_README.format(client=client, what=what, version=harness.PINNED[client][1],
                                                   rows="\n".join(rows)))


def main(argv: list[str]) -> int:
    wanted = argv or list(harness.CLIENTS)
    for spec in wanted:
        client, _, only = spec.partition(":")
        reason = harness.missing_reason(client)
        if reason:
            print(f"{client}: skipped: {reason}", file=sys.stderr)
            return 1
        names = [only] if only else [s.name for s in harness.scenarios(client, Path("/nonexistent"))]
        for name in names:
            generate(client, name)
        write_readme(client)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
