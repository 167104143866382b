"""The JSON the pages of ``opal web`` read: one function per endpoint, ``/api/<name>``.

Each takes the repository and the query's parameters and returns what the page
draws, computed by the same porcelain calls the commands make, so a page and
``opal ... --json`` agree. Read-only: nothing here takes the repository's lock or
writes a ref. What is stored is shown, so a secret appears as the placeholder the
redaction left (the vault is never read).
"""

from __future__ import annotations

from typing import Callable

from opalgit.errors import UsageError
from opalgit.history import sequence
from opalgit.history.states import current_branch, load_state, resolve
from opalgit.history.tokens import estimate
from opalgit.porcelain.states import normal_of, of_item
from opalgit.store.repo import Repository

#: Turns on one page of the state view: enough to read on, few enough that a page of a
#: 100,000-turn state is read in a few leaves.
PAGE = 200
#: How far after a tool call its results are looked for when a turn is opened.
RESULT_WINDOW = 400
#: Matches the search page lists; the count of all of them is given beside.
SEARCH_LIMIT = 500
PREVIEW_WIDTH = 160


def _int(params: dict[str, str], name: str, default: int, *, low: int = 1) -> int:
    text = params.get(name)
    if text in (None, ""):
        return default
    try:
        value = int(text)  # type: ignore[arg-type]
    except ValueError:
        raise UsageError(f"{name}={text!r} is not a number") from None
    if value < low:
        raise UsageError(f"{name}={value} is below {low}")
    return value


def _need(params: dict[str, str], name: str, example: str) -> str:
    value = (params.get(name) or "").strip()
    if not value:
        raise UsageError(f"give {name}", hint=f"e.g. {example}")
    return value


# ------------------------------------------------------------------ refs and graph
def refs(repo: Repository, params: dict[str, str]) -> dict:
    """The branches a page offers to open, the current one first."""
    from opalgit.porcelain.branch import branches, remote_branches
    from opalgit.porcelain.merge import in_progress

    pending = in_progress(repo)
    return {
        "head": current_branch(repo),
        "branches": [b.to_json() for b in branches(repo)],
        "remotes": [r.to_json() for r in remote_branches(repo)],
        "merging": ({"branch": pending.get("branch"), "name": pending.get("name")} if pending else None),
        "workdir": repo.workdir,
    }


def graph(repo: Repository, params: dict[str, str]) -> dict:
    from opalgit.web.graph import graph as lay_out

    return lay_out(repo)


# ------------------------------------------------------------------ one state
def _turn_row(repo: Repository, number: int, si: sequence.StoredItem) -> dict:
    """A row as ``opal log --turns --json`` lists it, with what the state page adds: the
    calls and results it holds (to pair them on the page) and its preview."""
    from opalgit.porcelain.log import TurnInfo

    s = si.item.summary
    return {
        **TurnInfo(number, si.index, si.item.id, s).to_json(),
        "calls": list(s.get("calls", ())),
        "results": list(s.get("results", ())),
        "preview": of_item(repo, si.item, PREVIEW_WIDTH),
    }


def state(repo: Repository, params: dict[str, str]) -> dict:
    """One page of a state's turns, from turn ``from`` (1-based), ``limit`` at most.

    The page's first record is found by descending the sequence's counts, and only the
    leaves the page spans are read: a page of a 100,000-turn state costs what a page
    of a short one does.
    """
    rev = params.get("rev") or "HEAD"
    target = resolve(repo, rev)
    st = load_state(repo, target.oid)
    total = st.header.turns
    first = _int(params, "from", 1)
    limit = min(_int(params, "limit", PAGE), 1000)
    rows: list[dict] = []
    meta = 0
    if first <= total:
        start = sequence.item_index_of_turn(repo.store, st.root, first - 1)
        number = first - 1
        for si in sequence.iter_items(repo.store, st.root, start):
            if not si.item.is_turn:
                meta += 1
                continue
            number += 1
            rows.append(_turn_row(repo, number, si))
            if len(rows) >= limit:
                break
    h = st.header
    return {
        "rev": rev,
        "id": st.oid.hex(),
        "message": st.commit.message.splitlines()[0] if st.commit.message else "",
        "agent": h.session.agent if h.session else None,
        "session": h.session.id if h.session else None,
        "turns": total,
        "records": h.items,
        "tokens": estimate(h.chars),
        "from": first,
        "limit": limit,
        "meta_in_page": meta,
        "items": rows,
    }


def _results_after(repo: Repository, st, index: int, calls: list[str]) -> list[dict]:
    """The results of ``calls``, looked for in the records after ``index``; each with
    its turn number (results of parallel calls may come several records later)."""
    wanted = set(calls)
    out: list[dict] = []
    number = sequence.turns_before(repo.store, st.root, index + 1)
    for si in sequence.iter_items(repo.store, st.root, index + 1, index + 1 + RESULT_WINDOW):
        if si.item.is_turn:
            number += 1
        hit = wanted.intersection(si.item.summary.get("results", ()))
        if not hit:
            continue
        normal = normal_of(repo, si.item)
        for b in normal.blocks:
            if b.get("type") == "tool_result" and b.get("call_id") in hit:
                out.append({"turn": number, "call_id": b.get("call_id"), "block": b})
        wanted -= hit
        if not wanted:
            break
    return out


def turn(repo: Repository, params: dict[str, str]) -> dict:
    """One turn in full: its blocks, its stored record, and the results of its calls."""
    from opalgit.porcelain.show import show_turn

    rev = params.get("rev") or "HEAD"
    n = _int(params, "turn", 0, low=-(10**9))
    if n == 0:
        raise UsageError("give turn=N (1-based; negative counts from the end)")
    st = load_state(repo, resolve(repo, rev).oid)
    shown = show_turn(repo, st.oid, n)
    blocks = [b for b in shown.normal.blocks if b.get("type") == "tool_call"]
    calls = [b.get("id") for b in blocks if b.get("id")]
    body = shown.to_json()
    # A call the session gave no id (older or drifted formats) cannot be paired with a
    # result: the page says so rather than show it as unanswered or guess.
    body["calls_without_id"] = len(blocks) - len(calls)
    body["summary_tool"] = shown.summary.get("tool")
    body["results"] = _results_after(repo, st, shown.index, calls) if calls else []
    body["open_calls"] = sorted(set(calls) - {r["call_id"] for r in body["results"]})
    return body


# ------------------------------------------------------------------ two states
def _conflict_turns(pending: dict) -> dict:
    ours: set[int] = set()
    theirs: set[int] = set()
    for c in pending.get("conflicts") or ():
        ours.update(t["turn"] for t in c.get("ours", ()) if t.get("turn"))
        theirs.update(t["turn"] for t in c.get("theirs", ()) if t.get("turn"))
    return {"ours": sorted(ours), "theirs": sorted(theirs)}


def diff(repo: Repository, params: dict[str, str]) -> dict:
    """Two states side by side: their shared prefix as a count, then each entry.

    Without ``a`` and ``b`` during a merge that stopped on conflicts, the merge's two
    sides, with the conflicting turns marked.
    """
    from opalgit.porcelain.diff import diff as compare
    from opalgit.porcelain.merge import in_progress

    pending = in_progress(repo)
    a, b = params.get("a"), params.get("b")
    if not a and not b and pending:
        a, b = str(pending["ours"].hex()), str(pending["theirs"].hex())
    if not a:
        raise UsageError("give a=REV (and b=REV; b defaults to the current branch)", hint="e.g. a=main&b=try-sqlite")
    res = compare(repo, a, b or None)
    merge = None
    if pending and {res.a_oid, res.b_oid} == {pending["ours"], pending["theirs"]}:
        sides = _conflict_turns(pending)
        if res.a_oid != pending["ours"]:
            sides = {"ours": sides["theirs"], "theirs": sides["ours"]}
        merge = {"merging": pending.get("name"), "branch": pending.get("branch"),
                 "conflicts": pending.get("conflicts") or [], "choices": pending.get("choices") or {},
                 "turns_a": sides["ours"], "turns_b": sides["theirs"],
                 "continue": "opal merge --continue --take N=ours|theirs|both|base", "abort": "opal merge --abort"}
    return {
        "a": res.a, "b": res.b, "a_id": res.a_oid.hex(), "b_id": res.b_oid.hex(),
        "common_prefix_turns": res.common_prefix_turns, "shared_turns": res.shared_turns,
        "stat": res.stat, "entries": [e.to_json() for e in res.entries], "merge": merge,
    }


def budget(repo: Repository, params: dict[str, str]) -> dict:
    from opalgit.web.budget import budget as spend

    return spend(repo, params.get("rev") or "HEAD")


def cuts(repo: Repository, params: dict[str, str]) -> dict:
    """The budget page's second request: the cuts, which plan each command (seconds on
    a 100,000-turn state, where the figures take a fraction of one)."""
    from opalgit.web.budget import cuts as plan

    return plan(repo, params.get("rev") or "HEAD")


# ------------------------------------------------------------------ code and search
def blame(repo: Repository, params: dict[str, str]) -> dict:
    """``opal blame PATH [REV]``: who wrote each line, the agent's turn or a person's commit."""
    from opalgit.porcelain.blame import blame as who

    if repo.workdir is None:
        raise UsageError("blame needs a repository with a working tree")
    path = _need(params, "path", "path=src/app.py")
    return who(repo, path, repo.workdir, params.get("rev") or None).to_json()


def search(repo: Repository, params: dict[str, str]) -> dict:
    """``opal grep --all``: every turn of every branch that matches."""
    from opalgit.porcelain.grep import grep

    pattern = _need(params, "q", "q=TODO")
    revs = [params["rev"]] if params.get("rev") else []
    res = grep(repo, pattern, revs, all_branches=not revs, ignore_case=params.get("i") == "1",
               fixed=params.get("fixed") == "1")
    return {
        "pattern": pattern,
        "count": len(res.turns),
        "lines": sum(len(t.lines) for t in res.turns),
        "matches": [t.to_json() for t in res.turns[:SEARCH_LIMIT]],
        "limit": SEARCH_LIMIT,
        "searched": res.stats.to_json(),
        "unreadable": [{"rev": r, "record": n, "why": w} for r, n, w in res.unreadable],
    }


# ------------------------------------------------------------------ the op log
def ops(repo: Repository, params: dict[str, str]) -> dict:
    """The operation log, newest first, each with the command that takes it back."""
    from opalgit.porcelain.undo import op_log

    out = []
    for o in op_log(repo, _int(params, "limit", 500)):
        body = o.to_json()
        body["undo"] = f"opal undo {o.oid.hex()[:10]}" if o.oid and o.command not in ("init", "gc", "expired") else None
        out.append(body)
    return {"operations": out}


ENDPOINTS: dict[str, Callable[[Repository, dict[str, str]], dict]] = {
    "refs": refs, "graph": graph, "state": state, "turn": turn, "diff": diff, "budget": budget, "cuts": cuts,
    "blame": blame, "search": search, "ops": ops,
}
