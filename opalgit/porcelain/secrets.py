"""Secrets in the porcelain: redact before storing, restore on the owner's export, gate pushes.

Porcelain layer; the detection rules live in :mod:`opalgit.secrets.redact` (pure) and the
originals in the local :mod:`opalgit.secrets.vault`. The flow:

* ``opal commit`` redacts every record before it is encoded, so no object in the
  repository (and so nothing any push can send) holds a secret a rule knows; the
  originals go to the vault first, so a placeholder never exists without its secret.
* ``opal export`` puts the originals back when the vault has them (the owner's own
  machine), unless ``--no-secrets``; a teammate's clone has no vault and exports the
  placeholders.
* ``opal secrets scan`` lists what was redacted (kind, turn, placeholder) and any
  secret still in clear (committed before a rule existed), never the secret itself.
* ``opal push`` scans everything it would send and refuses, naming the turns, when
  a secret is in clear, unless ``--allow-secrets``.
* ``opal secrets purge`` rewrites the states that hold a secret in clear (and the
  states after them) as if it had been redacted at commit time: one op-log
  operation, undoable.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Iterable, Iterator

from opalgit import codec
from opalgit.errors import InputError, OpalError, RevisionError, UsageError
from opalgit.history import oplog, payloads, sequence
from opalgit.history.model import SessionInfo, StateHeader, Turn
from opalgit.history.states import STATE_BLOB, load_state
from opalgit.plural import count
from opalgit.secrets.redact import Finding, Redactor, Rules, placeholders_in_value, restore_bytes, restore_value
from opalgit.secrets.rules import Rule
from opalgit.secrets.vault import Vault, default_path
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field

RULES_FILE = "secrets.toml"


class SecretsFoundError(OpalError):
    """A push would send a secret in clear."""

    exit_code = 9


def rules_path(repo: Repository) -> str:
    """``<git-common-dir>/opal/secrets.toml``: never cloned or pushed, so a repository
    you clone cannot ship rules that weaken the redaction of your secrets."""
    return os.path.join(repo.opal_dir, RULES_FILE)


def load_rules(repo: Repository) -> Rules:
    from opalgit.fileio import read_input

    path = rules_path(repo)
    try:
        data = read_input(path, what="secret rules file", hint=f"remove {path} or make it a regular file",
                          limit=16 << 20)
    except FileNotFoundError:
        return Rules.default()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 (byte {exc.start})", path=path, hint="save the rules file as UTF-8") from None
    return Rules.load(text, source=path)


def vault(repo: Repository) -> Vault:
    return Vault(default_path(repo.common_dir))


#: The kind of a secret given to ``opal secrets purge --literal``.
LITERAL_KIND = "literal"
#: Shorter literals would replace common words everywhere.
MIN_LITERAL = 8


def literal_rule(text: str) -> Rule:
    """A rule that finds ``text`` exactly (a secret no rule knows)."""
    return Rule(LITERAL_KIND, re.compile(re.escape(text)), keywords=(text,), priority=0,
                description="a secret given to 'opal secrets purge --literal'")


def check_literal(text: str) -> str:
    if len(text) < MIN_LITERAL:
        raise UsageError(
            f"--literal takes the secret itself, at least {MIN_LITERAL} characters (this one has {len(text)})",
            hint="a shorter text would be replaced wherever it occurs, in every turn",
        )
    if text != text.strip() or "\n" in text:
        raise UsageError("--literal takes one line without leading or trailing spaces",
                         hint="give the secret alone, as it appears in the session")
    return text


def with_literals(rules: Rules, literals: Iterable[str]) -> Rules:
    extra = [literal_rule(t) for t in dict.fromkeys(literals)]
    if not extra:
        return rules
    return Rules(list(rules.user_rules) + extra, allow_values=rules.allow_values,
                 allow_regexes=rules.allow_regexes, disable=rules.disabled)


def vault_literals(v: Vault) -> list[str]:
    """The secrets purged with ``--literal`` so far: every later commit, scan and push
    gate finds them too (the agent's session file still holds them in clear)."""
    if not v.exists():
        return []
    return sorted(secret for ph, secret in v.mapping().items() if _kind_of(ph) == LITERAL_KIND)


def enabled(repo: Repository) -> bool:
    return (repo.config_get("secrets.redact", "true") or "true").lower() not in ("false", "no", "off", "0")


def redactor(repo: Repository) -> Redactor | None:
    """The committing redactor (creates the vault's key on first use), or None if disabled."""
    if not enabled(repo):
        return None
    v = vault(repo)
    key = v.key()
    return Redactor(with_literals(load_rules(repo), vault_literals(v)), key)


def redact_turn(turn: Turn, r: Redactor) -> tuple[Turn, list[Finding]]:
    """A resolved source turn with its secrets replaced by placeholders."""
    if turn.has_record:
        value, found = r.redact_value(turn.record)
        return (turn if not found else Turn.from_record(turn.agent, value)), found
    if isinstance(turn.line, bytes):
        data, found = r.redact_bytes(turn.line)
        return (turn if not found else Turn.from_line(turn.agent, data)), found
    if turn.blocks is not None:
        blocks, found = r.redact_value(list(turn.blocks))
        return (turn if not found else Turn.authored(turn.role or "meta", blocks)), found
    return turn, []


def redact_header(repo: Repository, header: StateHeader, message: str) -> tuple[StateHeader, str]:
    """A state header and commit message with their secrets replaced, the originals
    put in the vault first: the session's title, model and folder, the adapter's
    resume state (``source.state``, where Claude's ai-title, Codex's thread_name and
    Gemini's summary are kept), ``extra``, and the message. ``source.path`` stays:
    the next commit finds the session file by it."""
    r = redactor(repo)
    if r is None:
        return header, message
    found: list[Finding] = []
    session, source, extra = header.session, header.source, header.extra
    if session is not None:
        m, f = r.redact_value(session.to_map())
        if f:
            found += f
            session = SessionInfo.from_map(m)
    if source is not None and source.state:
        st, f = r.redact_value(source.state)
        if f:
            found += f
            source = replace(source, state=st)
    if extra:
        ex, f = r.redact_value(extra)
        if f:
            found += f
            extra = ex
    new_message, f = r.redact_text(message)
    found += f
    if not found:
        return header, message
    vault(repo).put(found)
    return replace(header, session=session, source=source, extra=extra), new_message


def redact_text_for(repo: Repository, text: str) -> str:
    """``text`` (a ``squash -m`` summary, a message) with its secrets replaced, the
    originals in the vault first."""
    r = redactor(repo)
    if r is None:
        return text
    out, found = r.redact_text(text)
    if found:
        vault(repo).put(found)
    return out


def header_values(header: StateHeader) -> dict:
    """What a state header records as text, for scans."""
    return {
        "session": header.session.to_map() if header.session is not None else {},
        "source.state": header.source.state if header.source is not None else {},
        "extra": header.extra,
    }


def restore_turn(turn: Turn, mapping: dict[str, str]) -> Turn:
    if not mapping:
        return turn
    if turn.has_record:
        return Turn.from_record(turn.agent, restore_value(turn.record, mapping))
    if isinstance(turn.line, bytes):
        return Turn.from_line(turn.agent, restore_bytes(turn.line, mapping))
    if turn.blocks is not None:
        return Turn.authored(turn.role or "meta", restore_value(list(turn.blocks), mapping))
    return turn


def secret_mapping(repo: Repository) -> dict[str, str]:
    """placeholder -> secret from this machine's vault; empty (and nothing created) without one."""
    v = vault(repo)
    return v.mapping() if v.exists() else {}


# ------------------------------------------------------------------------------ scanning


@dataclass
class ScanResult:
    """What ``opal secrets scan`` found: placeholders in the states, and secrets left in clear."""

    rev: str
    redacted: list[dict] = field(default_factory=list)  # {turn, kind, placeholder}
    leaks: list[dict] = field(default_factory=list)  # {turn, kind, where}  (never the secret)
    states: int = 0
    turns: int = 0

    def to_json(self) -> dict:
        return {"rev": self.rev, "states": self.states, "turns_scanned": self.turns, "redacted": self.redacted, "in_clear": self.leaks}


def _kind_of(placeholder: str) -> str:
    parts = placeholder.split(":")
    return parts[1] if len(parts) >= 3 else "secret"


def scan_states(repo: Repository, heads: Iterable[bytes], rev: str = "", *, history: bool = True) -> ScanResult:
    """Scan every state reachable from ``heads`` (each leaf and payload once)."""
    scanner = Redactor(with_literals(load_rules(repo), vault_literals(vault(repo))))
    result = ScanResult(rev)
    seen_commits: set[bytes] = set()
    seen_leaves: set[bytes] = set()
    seen_payloads: set[bytes] = set()
    stack = list(heads)
    while stack:
        oid = stack.pop()
        if oid in seen_commits:
            continue
        seen_commits.add(oid)
        commit = repo.store.read_commit(oid)
        names = {n for n, _, _ in repo.store.read_tree(commit.tree)}
        if STATE_BLOB not in names:
            continue
        st = load_state(repo, oid)
        result.states += 1
        # What the state records besides its turns: the header (titles, the
        # adapter's resume state) and the commit message.
        for label, value in (("header", header_values(st.header)), ("message", commit.message)):
            for hit in scanner.scan_value(value):
                where = "/".join(str(p) for p in hit.path) or "text"
                result.leaks.append({"turn": f"{oid.hex()[:10]} {label}", "kind": hit.kind, "where": where})
        number = 0
        for leaf in sequence.leaves(repo.store, st.root):
            items = sequence.read_leaf(repo.store, leaf.oid)
            fresh = leaf.oid not in seen_leaves
            seen_leaves.add(leaf.oid)
            for it in items:
                if it.is_turn:
                    number += 1
                if not fresh:
                    continue
                result.turns += 1
                where = f"{oid.hex()[:10]}:{number}" if it.is_turn else f"{oid.hex()[:10]} record"
                turn = Turn.decode(it.canon)
                value = turn.record if turn.has_record else (turn.line if isinstance(turn.line, bytes) else list(turn.blocks or ()))
                if isinstance(value, bytes):
                    value = value.decode("utf-8", "replace")
                for ph in placeholders_in_value(value):
                    result.redacted.append({"turn": where, "kind": _kind_of(ph), "placeholder": ph})
                for hit in scanner.scan_value(value):
                    result.leaks.append({"turn": where, "kind": hit.kind, "where": "/".join(str(p) for p in hit.path) or "text"})
                for hit in scanner.scan_value(it.summary):  # what 'opal log --turns' shows of it
                    result.leaks.append({"turn": where, "kind": hit.kind, "where": "/".join(("summary",) + tuple(str(p) for p in hit.path))})
                for d, loc in it.payload_oids.items():
                    if d in seen_payloads:
                        continue
                    seen_payloads.add(d)
                    data = payloads.load(repo.store, d, loc)
                    text = data.decode("utf-8", "replace")
                    for ph in placeholders_in_value(text):
                        result.redacted.append({"turn": where, "kind": _kind_of(ph), "placeholder": ph})
                    for hit in scanner.scan_bytes(data):
                        result.leaks.append({"turn": where, "kind": hit.kind, "where": "payload " + d.hex()[:12]})
        if history:
            stack.extend(commit.parents)
    # One line per distinct placeholder and place is enough.
    result.redacted = [dict(t) for t in dict.fromkeys(tuple(sorted(r.items())) for r in result.redacted)]
    return result


def gate(repo: Repository, head: bytes, *, allow: bool = False) -> ScanResult:
    """Refuse to send a state that holds a secret in clear (the push gate)."""
    res = scan_states(repo, [head])
    if res.leaks and not allow:
        turns = sorted({leak["turn"] for leak in res.leaks})
        shown = ", ".join(turns[:5]) + (f" and {len(turns) - 5} more" if len(turns) > 5 else "")
        kinds = sorted({leak["kind"] for leak in res.leaks})
        raise SecretsFoundError(
            f"refusing to push: {count(len(res.leaks), 'secret')} in clear ({', '.join(kinds)}) in {shown}",
            hint="see 'opal secrets scan'; 'opal secrets purge' moves them into the vault, rewriting the states that hold them "
            "('opal undo' puts them back); or push with --allow-secrets to send them",
        )
    return res


# ------------------------------------------------------------------------------- purging


@dataclass
class PurgeResult:
    """What ``opal secrets purge`` did (or, with ``dry_run``, would do)."""

    refs: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)  # full ref name -> (old, new) head
    states: int = 0  # states rewritten
    kinds: list[str] = field(default_factory=list)  # of the secrets moved into the vault
    secrets: int = 0  # distinct placeholders written
    op: bytes | None = None
    dry_run: bool = False

    @property
    def branches(self) -> dict[str, tuple[bytes, bytes]]:
        """The rewritten refs by the names opal shows: ``main``, ``origin/main``, ``link 1a2b3c4d5e``."""
        return {ref_label(n): change for n, change in self.refs.items()}

    def to_json(self) -> dict:
        return {
            "refs": {n: {"name": ref_label(n), "old": a.hex(), "new": b.hex()} for n, (a, b) in self.refs.items()},
            "states_rewritten": self.states,
            "secrets": self.secrets,
            "kinds": self.kinds,
            "op": self.op.hex() if self.op else None,
            "dry_run": self.dry_run,
        }


def ref_label(name: str) -> str:
    from opalgit.store.refs import BRANCH_PREFIX, NAMESPACE, REMOTE_PREFIX
    from opalgit.sync.links import LINK_PREFIX, REMOTE_LINK_PREFIX

    if name.startswith(BRANCH_PREFIX):
        return name[len(BRANCH_PREFIX):]
    if name.startswith(REMOTE_PREFIX):
        return name[len(REMOTE_PREFIX):]  # origin/main
    if name.startswith(LINK_PREFIX):
        return "link " + name[len(LINK_PREFIX):][:10]
    if name.startswith(REMOTE_LINK_PREFIX):
        remote_name, _, sha = name[len(REMOTE_LINK_PREFIX):].rpartition("/")
        return f"link {remote_name}/{sha[:10]}"
    return name[len(NAMESPACE):] if name.startswith(NAMESPACE) else name


class _Purger:
    """Rewrites the states that hold a secret in clear, and every state after them.

    A state is *dirty* when a scan finds a secret in its records, their payloads and
    summaries, its header or its message. A dirty state, and every state whose
    parents were rewritten, is written again: every record redacted as a commit
    would have redacted it (the secret goes to the vault, the record holds its
    placeholder), its sequence built anew on a pack chain that continues the new
    parent's, so no pack of the new history holds a payload in clear. Author,
    committer and the rest of the header are kept; clean states before the first
    dirty one keep their ids.
    """

    def __init__(self, repo: Repository, r: Redactor, *, write: bool) -> None:
        self.repo, self.r, self.write = repo, r, write
        self.new: dict[bytes, bytes] = {}  # old commit -> new (itself when kept)
        self.changed: dict[bytes, bool] = {}
        self._leaf_dirty: dict[bytes, bool] = {}
        self._payload_dirty: dict[bytes, bool] = {}
        self.found: dict[str, Finding] = {}
        self.rewritten = 0

    def rewrite(self, head: bytes) -> bytes:
        store = self.repo.store
        stack: list[tuple[bytes, bool]] = [(head, False)]
        while stack:  # parents first, without recursion (histories can be long)
            oid, ready = stack.pop()
            if oid in self.changed:
                continue
            commit = store.read_commit(oid)
            if not ready:
                stack.append((oid, True))
                stack.extend((p, False) for p in commit.parents if p not in self.changed)
                continue
            self._one(commit)
        return self.new[head]

    def _one(self, commit) -> None:
        store = self.repo.store
        oid = commit.oid
        reparented = any(self.changed[p] for p in commit.parents)
        names = {n for n, _, _ in store.read_tree(commit.tree)}
        if STATE_BLOB not in names:
            dirty = False
            st = None
        else:
            st = load_state(self.repo, oid)
            dirty = self._state_dirty(st, commit.message)
        self.changed[oid] = dirty or reparented
        if not self.changed[oid]:
            self.new[oid] = oid
            return
        self.rewritten += st is not None
        if not self.write:
            self.new[oid] = oid
            return
        parents = [self.new[p] for p in commit.parents]
        if st is None:
            self.new[oid] = store.write_commit(commit.tree, parents, commit.author, commit.committer, commit.message)
            return
        self.new[oid] = self._rebuild(st, commit, parents)

    # -- finding ------------------------------------------------------------------

    def _state_dirty(self, st, message: str) -> bool:
        if self.r.scan_value(header_values(st.header)) or self.r.scan_text(message):
            return True
        return any(self._leaf_is_dirty(leaf.oid) for leaf in sequence.leaves(self.repo.store, st.root))

    def _leaf_is_dirty(self, leaf: bytes) -> bool:
        known = self._leaf_dirty.get(leaf)
        if known is not None:
            return known
        dirty = False
        for it in sequence.read_leaf(self.repo.store, leaf):
            turn = Turn.decode(it.canon)
            if self.r.scan_value(_scanned_value(turn)) or self.r.scan_value(it.summary):
                dirty = True
                break
            if any(self._payload_is_dirty(d, loc) for d, loc in it.payload_oids.items()):
                dirty = True
                break
        self._leaf_dirty[leaf] = dirty
        return dirty

    def _payload_is_dirty(self, d: bytes, loc) -> bool:
        known = self._payload_dirty.get(d)
        if known is None:
            known = self._payload_dirty[d] = bool(self.r.scan_bytes(payloads.load(self.repo.store, d, loc)))
        return known

    # -- rewriting ----------------------------------------------------------------

    def _secure(self, found: list[Finding]) -> None:
        new = [f for f in found if f.placeholder not in self.found]
        if new:
            vault(self.repo).put(new)  # before any object holding the placeholder
            self.found.update((f.placeholder, f) for f in new)

    def _items(self, st) -> Iterator[sequence.Item]:
        from opalgit.history.states import turn_of

        for si in sequence.iter_items(self.repo.store, st.root):
            it = si.item
            turn, found = redact_turn(turn_of(self.repo, it), self.r)
            summary, more = self.r.redact_value(it.summary)
            if found or more:
                self._secure(found + more)
            held: dict[bytes, bytes] = {}
            canon = turn.encode(held)
            yield sequence.Item(codec.digest(canon), canon, summary, payloads=held)

    def _rebuild(self, st, commit, parents: list[bytes]) -> bytes:
        from opalgit.history.states import PACKS_TREE, TURNS_TREE, packer_for

        store = self.repo.store
        states = [load_state(self.repo, p) for p in parents if STATE_BLOB in {n for n, _, _ in store.read_tree(store.read_commit(p).tree)}]
        packer = packer_for(self.repo, states[0] if states else None, also=states[1:])
        root = sequence.build(store, self._items(st), packer)
        packer.keep_window()
        header, message = redact_header(self.repo, st.header, commit.message)
        entries = [(STATE_BLOB, False, store.write_blob(codec.frame(header.encode())))]
        if root is not None:
            entries.append((TURNS_TREE, True, root.oid))
        if packer.tip is not None:
            entries.append((PACKS_TREE, True, packer.tip))
        oid = store.write_commit(store.write_tree(entries), parents, commit.author, commit.committer, message)
        store.flush()
        return oid


def _scanned_value(turn: Turn):
    """What a scan reads of a stored turn (payload references stay references)."""
    if turn.has_record:
        return turn.record
    if isinstance(turn.line, bytes):
        return turn.line.decode("utf-8", "replace")
    return list(turn.blocks or ())


def purge(
    repo: Repository, branches: Iterable[str] = (), *, literals: Iterable[str] = (), dry_run: bool = False
) -> PurgeResult:
    """Take every secret in clear out of the history of ``branches`` (default: every
    ref under ``refs/opal/`` but the op log: local and remote-tracking branches, the
    states linked to code commits), as if it had been redacted when it was committed.

    ``literals`` are secrets no rule finds, given as they are: they are purged like
    the others, and the vault keeps them, so later commits, scans and pushes find them too.

    The rewritten heads are set in one operation of the op log, each compared with
    the head read (a ref moved meanwhile fails the whole operation), so ``opal
    undo`` puts the old states back until ``opal gc`` (which expires this operation
    and all before it, see :mod:`opalgit.porcelain.gc`) deletes them.
    """
    from opalgit.store.refs import BRANCH_PREFIX, OPLOG_REF, REMOTE_PREFIX, branch_ref

    if not enabled(repo):
        raise UsageError(
            "redaction is off (secrets.redact = false): there is nothing to purge with",
            hint="turn it on with 'opal config secrets.redact true', then run 'opal secrets purge' again",
        )
    literals = [check_literal(t) for t in literals]
    with repo.lock():
        v = vault(repo)
        r = Redactor(with_literals(load_rules(repo), vault_literals(v) + literals), v.key())
        refs = repo.refs.all()
        heads: dict[str, bytes] = {}
        for name in dict.fromkeys(branches):
            ref = next((x for x in (branch_ref(name), REMOTE_PREFIX + name) if x in refs), None)
            if ref is None:
                raise RevisionError(f"no branch named {name!r}", hint="see 'opal branch -a'")
            heads[ref] = refs[ref]
        if not heads:
            heads = {n: oid for n, oid in sorted(refs.items()) if n != OPLOG_REF}
        p = _Purger(repo, r, write=not dry_run)
        new_heads = {ref: p.rewrite(oid) for ref, oid in heads.items()}
        result = PurgeResult(dry_run=dry_run, states=p.rewritten)
        result.refs = {n: (heads[n], new_heads[n]) for n in heads if p.changed[heads[n]]}
        result.kinds = sorted({f.kind for f in p.found.values()})
        result.secrets = len(p.found)
        if dry_run or not result.refs:
            return result
        local = [n[len(BRANCH_PREFIX):] for n in result.refs if n.startswith(BRANCH_PREFIX)]
        others = len(result.refs) - len(local)
        refs_word = f"{others} other ref{'s' if others != 1 else ''}"
        what = ", ".join(local) + (f" and {refs_word}" if local and others else refs_word if others else "")
        op = oplog.new(repo, "purge", "purge secrets from " + what, dict(result.refs))
        result.op = oplog.apply(repo, op).oid
        return result
