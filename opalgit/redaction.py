"""Secrets in the porcelain: redact before storing, restore on the owner's export, gate pushes.

Porcelain layer; the detection rules live in :mod:`opalgit.redact` (pure) and the
originals in the local :mod:`opalgit.vault`. The flow:

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
"""

from __future__ import annotations

import os
from typing import Iterable

from . import payloads, sequence
from .errors import InputError, OpalError
from .model import Turn
from .redact import Finding, Redactor, Rules, placeholders_in_value, restore_bytes, restore_value
from .repo import Repository
from .states import STATE_BLOB, load_state
from .structs import dataclass, field
from .vault import Vault, default_path

RULES_FILE = "secrets.toml"


class SecretsFoundError(OpalError):
    """A push would send a secret in clear."""

    exit_code = 9


def rules_path(repo: Repository) -> str:
    """``<git-common-dir>/opal/secrets.toml``: never cloned or pushed, so a repository
    you clone cannot ship rules that weaken the redaction of your secrets."""
    return os.path.join(repo.opal_dir, RULES_FILE)


def load_rules(repo: Repository) -> Rules:
    from .fileio import read_input

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


def enabled(repo: Repository) -> bool:
    return (repo.config_get("secrets.redact", "true") or "true").lower() not in ("false", "no", "off", "0")


def redactor(repo: Repository) -> Redactor | None:
    """The committing redactor (creates the vault's key on first use), or None if disabled."""
    if not enabled(repo):
        return None
    return Redactor(load_rules(repo), vault(repo).key())


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
    scanner = Redactor(load_rules(repo))
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
            f"refusing to push: {len(res.leaks)} secret(s) in clear ({', '.join(kinds)}) in {shown}",
            hint="see 'opal secrets scan'; remove them (opal drop / opal trim) or push with --allow-secrets",
        )
    return res
