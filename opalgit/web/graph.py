"""The graph page's data: every state branch, remote branch and rewound-away commit,
laid out in lanes as ``git log --graph`` draws them.

Commits come from the branches, the remote-tracking branches, and the operation log:
a commit a rewind, reset or drop moved a branch away from is still kept by the log
(``opal undo`` brings it back), so it is drawn too, marked ``abandoned``. Rows are
git's ``--topo-order`` (:func:`opalgit.history.graph.order`, what ``opal log --graph``
uses), so the page and the terminal list commits alike.

The lanes: each row's commit takes the lane that waits for it (the leftmost, when
several children wait), or the first free one; its first parent inherits that lane,
each other parent the lane that already waits for it or a new one. An edge runs down
the lane reserved for its parent, and a reserved lane holds no other commit, so no
edge passes through a third commit's node. Each edge is a list of ``[col, row]``
points: from the child, into the lane, down it, into the parent.
"""

from __future__ import annotations

from opalgit.errors import OpalError
from opalgit.history import graph as order_graph
from opalgit.history import oplog
from opalgit.history.states import current_branch, load_state
from opalgit.history.tokens import estimate
from opalgit.store.refs import BRANCH_PREFIX, REMOTE_PREFIX
from opalgit.store.repo import Repository
from opalgit.sync import links
from opalgit.times import iso_seconds


def _tips(repo: Repository) -> tuple[dict[bytes, list[str]], dict[bytes, list[str]], list[bytes]]:
    """Branch heads, remote-tracking heads (``origin/main``), and the commits the
    op log holds as a branch's value before or after an operation."""
    branches: dict[bytes, list[str]] = {}
    remotes: dict[bytes, list[str]] = {}
    for ref, oid in sorted(repo.refs.all().items()):
        if ref.startswith(BRANCH_PREFIX):
            branches.setdefault(oid, []).append(ref[len(BRANCH_PREFIX):])
        elif ref.startswith(REMOTE_PREFIX):
            remotes.setdefault(oid, []).append(ref[len(REMOTE_PREFIX):])
    logged: list[bytes] = []
    for op in oplog.log(repo):
        for name, (old, new) in op.changes.items():
            if name.startswith(BRANCH_PREFIX):
                logged.extend(o for o in (old, new) if o is not None)
    return branches, remotes, list(dict.fromkeys(logged))


def _walk(repo: Repository, starts: list[bytes], commits: dict) -> None:
    stack = list(starts)
    while stack:
        oid = stack.pop()
        if oid in commits:
            continue
        try:
            commits[oid] = repo.store.read_commit(oid)
        except OpalError:  # expired by 'opal gc', or never fetched: nothing to draw
            continue
        stack.extend(commits[oid].parents)


def _reachable(starts: list[bytes], parents: dict[bytes, list[bytes]]) -> set[bytes]:
    seen: set[bytes] = set()
    stack = [s for s in starts if s in parents]
    while stack:
        oid = stack.pop()
        if oid not in seen:
            seen.add(oid)
            stack.extend(parents[oid])
    return seen


def lay_out(rows: list[bytes], parents: dict[bytes, list[bytes]]) -> tuple[dict[bytes, int], list[dict], int]:
    """Lanes for ``rows`` (children before parents): each commit's column, the edges
    (``from`` child, ``to`` parent, ``merge``, ``points``), and the number of columns."""
    row_of = {oid: r for r, oid in enumerate(rows)}
    lanes: list[bytes | None] = []
    waiting: dict[int, list[tuple[bytes, int, int, bool]]] = {}  # lane -> (child, its col, its row, merge)
    col_of: dict[bytes, int] = {}
    edges: list[dict] = []
    width = 0

    def free(avoid: int = -1) -> int:
        for i, x in enumerate(lanes):
            if x is None and i != avoid and not waiting.get(i):
                return i
        lanes.append(None)
        return len(lanes) - 1

    for r, oid in enumerate(rows):
        mine = [i for i, x in enumerate(lanes) if x == oid]
        col = mine[0] if mine else free()
        col_of[oid] = col
        for lane in mine:
            for child, ccol, crow, merge in waiting.pop(lane, []):
                pts = [[ccol, crow]]
                if lane != ccol:
                    pts.append([lane, crow + 1])
                if r - 1 > crow + (1 if lane != ccol else 0):
                    pts.append([lane, r - 1])
                if pts[-1] != [col, r]:
                    pts.append([col, r])
                edges.append({"from": child.hex(), "to": oid.hex(), "merge": merge, "points": pts})
            lanes[lane] = None
        ps = [p for p in parents[oid] if p in row_of]
        for n, p in enumerate(ps):
            have = [i for i, x in enumerate(lanes) if x == p]
            if have:
                lane = have[0]
            elif n == 0:
                lane = col
            else:
                lane = free(avoid=col)
            lanes[lane] = p
            waiting.setdefault(lane, []).append((oid, col, r, n > 0))
        width = max(width, len(lanes))
        while lanes and lanes[-1] is None and not waiting.get(len(lanes) - 1):
            lanes.pop()
    return col_of, edges, max(width, 1 if rows else 0)


def graph(repo: Repository) -> dict:
    """The graph page's JSON (docs/web.md): commits in rows and lanes, and the edges."""
    branches, remotes, logged = _tips(repo)
    commits: dict = {}
    live = list(branches) + list(remotes)
    _walk(repo, live + logged, commits)
    parents = {o: [p for p in c.parents if p in commits] for o, c in commits.items()}
    alive = _reachable(live, parents)
    starts = [o for o in live if o in commits] + [o for o in logged if o in commits and o not in alive]
    rows = order_graph.order(starts, parents, {o: c.committer.time for o, c in commits.items()}, "topo")
    col_of, edges, columns = lay_out(rows, parents)
    code_of: dict[bytes, list[bytes]] = {}
    for code, (state, _remote) in links.all_links(repo).items():
        code_of.setdefault(state, []).append(code)
    out = []
    for r, oid in enumerate(rows):
        c = commits[oid]
        header = load_state(repo, oid).header  # the state's header only: no turn is read
        codes = list(dict.fromkeys(code_of.get(oid, []) + [x for x in [links.trailer_code(c.message)] if x]))
        out.append({
            "id": oid.hex(), "parents": [p.hex() for p in parents[oid]],
            "message": c.message.split("\n", 1)[0].strip(), "turns": header.turns, "tokens": estimate(header.chars),
            "time": iso_seconds(c.committer.time), "agent": header.session.agent if header.session else None,
            "branches": branches.get(oid, []), "remotes": remotes.get(oid, []),
            "code": [_code(repo, x) for x in codes], "abandoned": oid not in alive, "row": r, "col": col_of[oid],
        })
    return {"head": current_branch(repo), "commits": out, "edges": edges, "columns": columns}


def _code(repo: Repository, oid: bytes) -> dict:
    try:
        subject = repo.store.read_commit(oid).message.split("\n", 1)[0].strip()
    except OpalError:  # a link to a code commit this clone does not have
        subject = ""
    return {"id": oid.hex(), "subject": subject}
