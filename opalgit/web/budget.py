"""The budget page's data: where a state's tokens go, and what would cut them.

The figures are ``opal stats``'s (:func:`opalgit.porcelain.diff.stats`), so the page
and the command agree. Each cut is the command to run and what it would save, worked
out by the code that command runs, without writing: ``opal trim`` by its plan
(:func:`opalgit.porcelain.trim.plan_trim`), ``opal drop`` by its plan
(:func:`opalgit.porcelain.drop.plan_drop`, widened as the command widens it so no
tool call loses its result), ``opal export --budget`` by a dry run of the export.
"""

from __future__ import annotations

import os

from opalgit.errors import OpalError
from opalgit.history import sequence
from opalgit.history.states import branch_head, current_branch, load_state, resolve
from opalgit.history.tokens import estimate
from opalgit.porcelain.diff import stats
from opalgit.porcelain.states import of_item
from opalgit.store.repo import Repository

#: Bars in the chart at most; a longer state is drawn in groups of consecutive turns.
BARS = 400
#: Tool-output sizes a trim is offered at (characters), largest first.
TRIM_SIZES = (64_000, 32_000, 16_000, 8_000, 4_000, 2_000)


def _bars(rows: list[tuple[int, str | None, str | None]]) -> list[dict]:
    if len(rows) <= BARS:
        return [{"first": n + 1, "last": n + 1, "tokens": t, "role": role, "tool": tool}
                for n, (t, role, tool) in enumerate(rows)]
    size = -(-len(rows) // BARS)
    out = []
    for start in range(0, len(rows), size):
        chunk = rows[start:start + size]
        roles = {r for _, r, _ in chunk}
        out.append({"first": start + 1, "last": start + len(chunk), "tokens": sum(t for t, _, _ in chunk),
                    "role": roles.pop() if len(roles) == 1 else None, "tool": None})
    return out


def _size(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def _trim_cuts(repo: Repository, st, outputs: list[int]) -> list[dict]:
    """``outputs``: the characters of each tool result, from the walk already made. A
    size that no more outputs exceed than the size before it would plan the same trim,
    so only the sizes where the count changes are planned (each plan reads the state)."""
    from opalgit.porcelain.trim import default_keep, plan_trim

    out: list[dict] = []
    seen: set[int] = set()
    last = 0
    for over in TRIM_SIZES:
        longer = sum(1 for n in outputs if n > over)
        if longer == last:
            continue
        last = longer
        plan = plan_trim(repo, st, over)
        if not plan.changed or plan.changed in seen:
            continue
        seen.add(plan.changed)
        out.append({"command": f"opal trim --tool-output-over {_size(over)}", "saves": plan.saved(st),
                    "what": f"shortens {plan.changed} tool output{'s' if plan.changed != 1 else ''} longer than "
                            f"{over:,} characters to a marked excerpt of {default_keep(over):,}"})
        if len(out) == 2:
            break
    return out


def _drop_cut(repo: Repository, st, prompts: list[int]) -> dict | None:
    """Dropping the oldest exchanges: the turns before the prompt nearest the middle."""
    from opalgit.porcelain.drop import plan_drop

    total = st.header.turns
    candidates = [p for p in prompts if 1 < p <= total]
    if not candidates:
        return None
    cut = min(candidates, key=lambda p: abs(p - total // 2)) - 1
    plan = plan_drop(repo, st, 1, cut)
    notes = "; " + "; ".join(plan.notes) if plan.notes else ""
    return {"command": f"opal drop HEAD:{plan.first}..HEAD:{plan.last}", "saves": plan.saved(st),
            "what": f"leaves out turns {plan.first} to {plan.last}, the oldest exchanges before a prompt "
                    f"(a tool call is never parted from its result){notes}"}


def _budget_cut(repo: Repository, rev: str, st, agent: str | None, tokens: int) -> dict | None:
    from opalgit.porcelain.export import export

    if not agent or tokens < 2000:
        return None
    target = max(1000, round(tokens // 2, -3))
    try:
        res = export(repo, os.environ, rev, to=agent, cwd=repo.workdir, dry_run=True, budget=target,
                     with_secrets=False)
    except OpalError as e:  # said on the page, in the cut's place
        return {"command": f"opal export {rev} --to {agent} --budget {target}", "saves": 0, "what": f"cannot: {e}"}
    changes = ", ".join(f"{k} {v}" for k, v in sorted(res.report.converted.items()) if k.startswith("budget:"))
    return {"command": f"opal export {rev} --to {agent} --budget {target}",
            "saves": res.tokens_before - res.tokens_after,
            "what": f"a new {agent} session of about {res.tokens_after:,} tokens, the branch unchanged"
                    + (f" ({changes})" if changes else "")}


def _walk(repo: Repository, st, outputs: list[int]) -> tuple[list[int], list[int]]:
    """One pass over the state's turns: the tokens of each and the turn numbers of its
    prompts; the characters of each tool result (turn or not, as ``opal trim`` sees
    them) appended to ``outputs``."""
    rows: list[int] = []
    prompts: list[int] = []
    for si in sequence.iter_items(repo.store, st.root):
        summary = si.item.summary
        if summary.get("kind") == "tool_result":
            outputs.append(int(summary.get("chars", 0)))
        if not si.item.is_turn:
            continue
        rows.append(estimate(int(summary.get("chars", 0))))
        if summary.get("role") == "user" and summary.get("kind") == "message":
            prompts.append(len(rows))
    return rows, prompts


def _preview(repo: Repository, st, turn: int) -> str:
    """Turn ``turn``'s preview, read by its index (the leaves before it are not read)."""
    start = sequence.item_index_of_turn(repo.store, st.root, turn - 1)
    for si in sequence.iter_items(repo.store, st.root, start):
        if si.item.is_turn:
            return of_item(repo, si.item, 120)
    return ""


def budget(repo: Repository, rev: str = "HEAD") -> dict:
    """The budget page's figures (docs/web.md): what it draws at once, in the one pass
    over the state that ``opal stats`` makes. The cuts take longer on a long state (they
    plan each command) and come from :func:`cuts`."""
    st = load_state(repo, resolve(repo, rev).oid)
    rows: list[tuple[int, str | None, str | None]] = []
    # The commit just resolved, not rev again: a branch that moves meanwhile must not
    # give figures of another state than the id said.
    s = stats(repo, st.oid.hex(), top=10,
              visit=lambda t, summary: rows.append((t, summary.get("role"), summary.get("tool"))))
    return {
        "rev": rev, "id": st.oid.hex(), "turns": s.turns, "tokens": s.tokens, "tool_calls": s.tool_calls,
        "bars": _bars(rows),
        "by_tool": [{"tool": k, **v} for k, v in s.by_tool.items()],
        "by_kind": [{"kind": k, **v} for k, v in s.by_kind.items()],
        "biggest": [{**b, "preview": _preview(repo, st, b["turn"])} for b in s.biggest],
    }


def cuts(repo: Repository, rev: str = "HEAD") -> dict:
    """What ``opal trim``, ``opal drop`` and ``opal export --budget`` would cut from the
    state at ``rev``, each as the command to run and the tokens it saves."""
    st = load_state(repo, resolve(repo, rev).oid)
    outputs: list[int] = []
    rows, prompts = _walk(repo, st, outputs)
    tokens = sum(rows)  # opal stats's figure: the sum over the turns
    on_branch = branch_head(repo, current_branch(repo)) == st.oid
    out = _trim_cuts(repo, st, outputs) + [c for c in [_drop_cut(repo, st, prompts)] if c]
    if not on_branch:
        # trim and drop edit the current branch: say how to get there first.
        for c in out:
            c["command"] = f"opal switch -c trimmed {st.oid.hex()[:10]} && {c['command']}"
    agent = st.header.session.agent if st.header.session else None
    out += [c for c in [_budget_cut(repo, rev, st, agent, tokens)] if c]
    return {"rev": rev, "id": st.oid.hex(), "tokens": tokens, "cuts": out}
