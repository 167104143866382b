"""States and revisions: reading state commits, resolving ``main~2`` / ``HEAD:12``, and
turning records into stored items. The base of the porcelain layer: every command
module builds on these helpers (``porcelain`` re-exports them).

Two things a state needs come from the layers above, and are passed in: the
adapter that gives a record its normalized view (:func:`normals_of` and
:func:`normal_of` take the registry's ``get``), and the redaction of what a state
commit records as text (:func:`write_state` takes it). :mod:`opalgit.porcelain.states`
binds both, so the porcelain writes and reads states one way.
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping, Protocol

from opalgit import codec
from opalgit.errors import RevisionError
from opalgit.history import oplog, payloads, sequence
from opalgit.history.model import Normal, StateHeader, Turn, summarize
from opalgit.history.sequence import Item, Node
from opalgit.store.argv import command
from opalgit.store.objects import CommitData
from opalgit.store.refs import OPLOG_REF, REMOTE_PREFIX, branch_ref
from opalgit.store.repo import Repository
from opalgit.structs import dataclass

STATE_BLOB = "opal"
TURNS_TREE = "turns"
#: The newest payload pack of the state's history: the next commit's packs continue
#: its chain (:mod:`payloads`). Optional.
PACKS_TREE = "packs"
#: The session's side folders (ReadResult.side), as a tree of blobs. Optional.
SIDE_TREE = "side"


class Normalizer(Protocol):
    """What the views of records need of an agent's adapter (:class:`opalgit.agents.base.Adapter`)."""

    def normalize(self, turn: Turn) -> Normal: ...

    def normalize_many(self, turns: list[Turn]) -> list[Normal]: ...


#: What :func:`write_state` asks to redact a state commit's text with: the header and
#: message in, the ones to store out (the originals put in the vault first).
Redact = Callable[[Repository, StateHeader, str], tuple[StateHeader, str]]


# ================================================================== reading states


@dataclass
class State:
    """A state commit, decoded: the commit, its header and its turn sequence."""

    commit: CommitData
    header: StateHeader
    root: Node | None
    packs: bytes | None = None  # the tip of the payload pack chain
    side: bytes | None = None  # the tree of the session's side-folder files

    @property
    def oid(self) -> bytes:
        return self.commit.oid


def load_state(repo: Repository, oid: bytes) -> State:
    commit = repo.store.read_commit(oid)
    entries = {name: (is_tree, child) for name, is_tree, child in repo.store.read_tree(commit.tree)}
    if STATE_BLOB not in entries:
        raise RevisionError(f"{oid.hex()[:12]} is not an opal state commit")
    header = StateHeader.decode(codec.unframe(repo.store.read_blob(entries[STATE_BLOB][1]), limit=codec.MAX_HEADER_SIZE,
                                             what=f"the state header of {oid.hex()[:12]}"))
    root = None
    if TURNS_TREE in entries:
        root = Node(entries[TURNS_TREE][1], header.items, header.turns)
    packs = entries[PACKS_TREE][1] if PACKS_TREE in entries and entries[PACKS_TREE][0] else None
    side = entries[SIDE_TREE][1] if SIDE_TREE in entries and entries[SIDE_TREE][0] else None
    return State(commit, header, root, packs, side)


def side_files(repo: Repository, state: State) -> dict[str, bytes]:
    """The side-folder files a state holds: relative path -> bytes (see SIDE_TREE)."""
    out: dict[str, bytes] = {}
    todo = [("", state.side)] if state.side is not None else []
    while todo:
        prefix, tree = todo.pop()
        for name, is_tree, oid in repo.store.read_tree(tree):
            if is_tree:
                todo.append((prefix + name + "/", oid))
            else:
                out[prefix + name] = repo.store.read_blob(oid)
    return dict(sorted(out.items()))


def _side_tree(repo: Repository, files: Mapping[str, bytes]) -> bytes | None:
    """The tree of ``files`` (relative path -> bytes), or None when there are none."""
    if not files:
        return None
    nested: dict = {}
    for rel, data in files.items():
        *dirs, name = rel.split("/")
        node = nested
        for d in dirs:
            node = node.setdefault(d, {})
        node[name] = data

    def write(node: dict) -> bytes:
        return repo.store.write_tree([(k, isinstance(v, dict), write(v) if isinstance(v, dict)
                                       else repo.store.write_blob(v)) for k, v in node.items()])

    return write(nested)


def write_state(
    repo: Repository,
    header: StateHeader,
    root: Node | None,
    parents: list[bytes],
    message: str,
    *,
    redact: Redact,
    packs: bytes | None = None,
    side: Mapping[str, bytes] | None = None,
) -> bytes:
    """Write a state commit. ``packs`` is the tip of the payload pack chain and
    ``side`` the session's side-folder files; by default the first parent's are
    carried forward. ``redact`` is given the header and message first: titles, the
    adapter's resume state and the message enter the object too. It is not optional,
    so that no caller can store them unredacted by forgetting it
    (:func:`opalgit.porcelain.states.write_state` passes the porcelain's)."""
    store = repo.store
    header, message = redact(repo, header, message)
    first = load_state(repo, parents[0]) if parents and (packs is None or side is None) else None
    if packs is None and first is not None:
        packs = first.packs
    side_tree = _side_tree(repo, side) if side is not None else (first.side if first is not None else None)
    entries = [(STATE_BLOB, False, store.write_blob(codec.frame(header.encode(), limit=codec.MAX_HEADER_SIZE)))]
    if root is not None:
        entries.append((TURNS_TREE, True, root.oid))
    if packs is not None:
        entries.append((PACKS_TREE, True, packs))
    if side_tree is not None:
        entries.append((SIDE_TREE, True, side_tree))
    tree = store.write_tree(entries)
    author, committer = repo.signatures()
    oid = store.write_commit(tree, parents, author, committer, message)
    store.flush()
    return oid


def packer_for(repo: Repository, state: State | None, *, also: list[State] = ()) -> payloads.Packer:
    """The payload packer of an operation that builds on ``state``.

    Its packs continue the state's chain, and it knows where every payload of
    ``state`` (and of ``also``) is stored, so that a payload stored before is named,
    not written again, and a sequence built again (a re-import, a fork) comes out as
    the same leaves. Without it 20 growing commits stored 1.16x one commit of the
    same session, with it 1.08x. Knowing means reading each leaf tree (~40 ms for
    10,000 turns) unless a commit on this machine cached it (:mod:`locations`).
    """
    from opalgit.history import locationcache as locations

    known: dict[bytes, payloads.Location] = {}
    for st in [state, *also]:
        if st is not None:
            for d, loc in locations.of(repo.store, repo.opal_dir, st.root).items():
                known.setdefault(d, loc)
    base = state.packs if state is not None else None
    if base is not None and not repo.store.exists(base):
        base = None
    return payloads.Packer(repo.store, base=base, known=known, opal_dir=repo.opal_dir)


def load_payload(repo: Repository, item: Item):
    def load(d: bytes) -> bytes:
        try:
            loc = item.payload_oids[d]
        except KeyError:
            data = item.payloads.get(d)
            if data is None:
                raise RevisionError(f"payload {d.hex()[:12]} is missing") from None
            return data
        return payloads.load(repo.store, d, loc)

    return load


def turn_of(repo: Repository, item: Item, *, resolve: bool = True) -> Turn:
    turn = Turn.decode(item.canon)
    # A leaf lists every payload its records name, so a record that names none has no
    # reference to resolve: the walk over it would copy it unchanged (most records).
    if not resolve or not (item.payload_oids or item.payloads):
        return turn
    return turn.resolve(load_payload(repo, item))


def normals_of(turns: list[Turn], adapter: Callable[[str], Normalizer]) -> list[Normal]:
    """Normalized views of a sequence of resolved turns, replayed per agent
    (``adapter``: an agent's name to its adapter, the registry's ``get``)."""
    out: list[Normal | None] = [None] * len(turns)
    for t_i, t in enumerate(turns):
        if t.agent == "opal":
            out[t_i] = Normal(role=t.role or "meta", blocks=list(t.blocks or ()))
    for agent in sorted({t.agent for t in turns if t.agent != "opal"}):
        ad = adapter(agent)
        idx = [i for i, t in enumerate(turns) if t.agent == agent]
        for i, n in zip(idx, ad.normalize_many([turns[i] for i in idx])):
            out[i] = n
    return [n for n in out if n is not None]


def normal_of(repo: Repository, item: Item, adapter: Callable[[str], Normalizer]) -> Normal:
    """The normalized view of one stored record, by its agent's adapter alone (see
    :func:`opalgit.porcelain.states.replays` for when that is not the replay's view)."""
    turn = turn_of(repo, item)
    if turn.agent == "opal":
        return Normal(role=turn.role or "meta", blocks=list(turn.blocks or ()))
    return adapter(turn.agent).normalize(turn)


# ================================================================== revisions


@dataclass
class Resolved:
    """A revision resolved: the state commit, and the turn it names if any."""

    oid: bytes  # the state commit
    turn: int | None  # 1-based turn number within it, or None
    text: str
    branch: str | None = None  # when the revision named a branch (or HEAD) without steps


def current_branch(repo: Repository) -> str:
    return repo.refs.head_branch()


def branch_head(repo: Repository, name: str) -> bytes | None:
    return repo.refs.get(branch_ref(name))


def resolve(repo: Repository, text: str) -> Resolved:
    from opalgit.history.revision import parse as parse_revision  # here: a commit names no revision

    rev = parse_revision(text)
    branch = None
    if rev.base == "HEAD":
        branch = current_branch(repo)
        oid = branch_head(repo, branch)
        if oid is None:
            raise RevisionError(
                f"branch {branch} has no commits yet",
                hint="run 'opal commit' to record the agent session",
            )
    else:
        oid, branch = _named(repo, rev.base)
    for kind, n in rev.steps:
        branch = None
        commit = repo.store.read_commit(oid)
        if kind == "~":
            for _ in range(n):
                if not commit.parents:
                    raise RevisionError(f"{text}: the history is not that long", hint="see 'opal log'")
                commit = repo.store.read_commit(commit.parents[0])
            oid = commit.oid
        else:
            if n == 0:
                continue
            if len(commit.parents) < n:
                raise RevisionError(f"{text}: commit {oid.hex()[:10]} has no parent {n}")
            oid = commit.parents[n - 1]
    return Resolved(oid, rev.turn, text, branch if rev.turn is None else None)


def _named(repo: Repository, name: str) -> tuple[bytes, str | None]:
    """A branch, a remote-tracking branch (``origin/x``, ``remotes/origin/x``) or a
    commit id prefix; the branch name too when it is a local branch.

    A name that is both a local branch and a remote-tracking one is refused, not
    resolved to one of them: either would silently hide the other. ``heads/NAME``
    and ``remotes/NAME`` say which one is meant."""
    local = branch_head(repo, name)
    tracked_name = name[len("remotes/") :] if name.startswith("remotes/") else name
    tracked = repo.refs.get(REMOTE_PREFIX + tracked_name) if "/" in tracked_name else None
    if local is not None and tracked is not None:
        if name.startswith("remotes/"):
            return tracked, None
        raise RevisionError(
            f"{name!r} is ambiguous: it names your branch {name} ({local.hex()[:7]}) and the remote-tracking "
            f"branch {name} ({tracked.hex()[:7]}) of remote {name.split('/', 1)[0]}",
            hint=f"say heads/{name} for your branch or remotes/{name} for the remote's; or give yours another "
            f"name ('{command('opal', 'branch', 'NEW', f'heads/{name}')}', then '{command('opal', 'branch', '-d', name)}')",
        )
    if local is not None:
        return local, name
    if tracked is not None:
        return tracked, None
    if name.startswith("heads/"):
        local = branch_head(repo, name[len("heads/") :])
        if local is not None:
            return local, name[len("heads/") :]
    return _by_prefix(repo, name), None


def _by_prefix(repo: Repository, prefix: str) -> bytes:
    if len(prefix) < 4 or any(c not in "0123456789abcdefABCDEF" for c in prefix):
        raise RevisionError(
            f"unknown revision {prefix!r}",
            hint="see 'opal branch -l' for branches and 'opal log' for commit ids",
        )
    prefix = prefix.lower()
    found: set[bytes] = set()
    for oid in _all_state_commits(repo):
        if oid.hex().startswith(prefix):
            found.add(oid)
    if not found:
        raise RevisionError(f"unknown revision {prefix!r}", hint="see 'opal log' for commit ids")
    if len(found) > 1:
        raise RevisionError(f"{prefix!r} is ambiguous ({len(found)} commits)", hint="give more digits")
    return found.pop()


def _all_state_commits(repo: Repository) -> Iterator[bytes]:
    seen: set[bytes] = set()
    stack = [oid for name, oid in repo.refs.all().items() if name != OPLOG_REF]
    # States that only the operation log still reaches (undone, rewound) count too.
    for op in oplog.log(repo):
        for old, new in op.changes.values():
            stack.extend(x for x in (old, new) if x)
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        try:
            commit = repo.store.read_commit(oid)
        except Exception:
            continue
        yield oid
        stack.extend(commit.parents)


def turn_item_index(repo: Repository, state: State, turn: int) -> int:
    """0-based record index of 1-based (or negative) turn number ``turn``."""
    total = state.header.turns
    n = turn - 1 if turn > 0 else total + turn
    if not 0 <= n < total:
        raise RevisionError(
            f"turn {turn} does not exist: {_short(state.oid)} has {total} turns",
            hint="see 'opal log --turns'",
        )
    return sequence.item_index_of_turn(repo.store, state.root, n)


def _short(oid: bytes) -> str:
    return oid.hex()[:10]


def _items(records) -> Iterator[Item]:
    for rec in records:
        payloads: dict[bytes, bytes] = {}
        canon = rec.turn.encode(payloads)
        yield Item(codec.digest(canon), canon, summarize(rec.normal), payloads=payloads)


def authored_item(role: str, blocks: list[dict]) -> Item:
    """A turn written by opal itself (a merge marker, a squash summary), ready to store."""
    payloads: dict[bytes, bytes] = {}
    canon = Turn.authored(role, blocks).encode(payloads)
    return Item(codec.digest(canon), canon, summarize(Normal(role=role, blocks=blocks)), payloads=payloads)


def _count(items: list[Item]) -> tuple[int, int]:
    return sum(1 for it in items if it.is_turn), sum(int(it.summary.get("chars", 0)) for it in items)


def common_prefix(repo: Repository, a: Node | None, b: Node | None) -> int:
    """How many leading records two sequences share (whole shared leaves are not read)."""
    if a is None or b is None:
        return 0
    if a.oid == b.oid:
        return a.items
    la, lb = sequence.leaves(repo.store, a), sequence.leaves(repo.store, b)
    n = 0
    for x, y in zip(la, lb):
        if x.oid == y.oid:
            n += x.items
            continue
        ia, ib = sequence.read_leaf(repo.store, x.oid), sequence.read_leaf(repo.store, y.oid)
        for p, q in zip(ia, ib):
            if p.id != q.id:
                return n
            n += 1
        if len(ia) != len(ib):
            return n
        # The same records, in leaves that differ only in where their payloads are
        # stored (a re-read writes them to another pack): the next leaves may be shared.
    return n


