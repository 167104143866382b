"""Push: send a state branch, and the links whose states are in its history, to a remote.

State branches travel as ordinary refs over git's own protocols, by running the real
``git push``, so that every remote the user's git can reach works with the user's own
credentials: ssh config and agent, credential helpers, ``insteadOf`` rewrites, proxies.
libgit2's push would need credential callbacks that re-implement all of that, and it
returns normally when the remote refuses a ref (the per-ref status must be read
separately); ``git push --porcelain`` reports every ref, and a rejection here is
always an error with git's reason.

One push sends one state branch and its links, atomically where the remote supports
it; the operation log (``refs/opal/oplog``) is never pushed: it is each user's own
history of what they did, like git's reflog. What may leave the machine is the
caller's to decide: :func:`push` takes the gate every state it sends must pass (the
porcelain's secret scan, :func:`opalgit.porcelain.secrets.gate`).
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

from opalgit.errors import ConflictError, RevisionError
from opalgit.history import oplog
from opalgit.history.revision import ancestors
from opalgit.store.argv import command as cmdline
from opalgit.store.refs import BRANCH_PREFIX, branch_ref, check_branch_name
from opalgit.store.repo import Repository
from opalgit.store.transport import run_git
from opalgit.structs import dataclass, field
from opalgit.sync.links import LINK_PREFIX, REMOTE_LINK_PREFIX, link_ref, local_links, remote_link_ref
from opalgit.sync.remotes import (
    UNPRINTABLE,
    Remote,
    RemoteError,
    get_remote,
    git_message,
    remote_branch_name,
    tracking_ref,
)

#: Refspecs per ``git push`` run (keeps the command line far below the OS limit).
PUSH_CHUNK = 500

#: What :func:`push` asks before anything is sent: ``gate(repo, head, allow=...)``
#: raises to refuse the state ``head`` (and its history).
Gate = Callable[..., object]


class PushRejectedError(ConflictError):
    """The remote refused a ref (not a fast-forward, a hook, permissions); nothing was changed."""


@dataclass
class RefUpdate:
    """One line of ``git push --porcelain``."""

    flag: str  # ' ' fast-forward, '+' forced, '-' deleted, '*' new, '!' rejected, '=' up to date
    src: str
    dst: str
    summary: str
    reason: str | None

    @property
    def ok(self) -> bool:
        return self.flag != "!"


_PORCELAIN = re.compile(r"^([ +\-*!=])\t([^\t]*):([^\t]*)\t(.*?)(?: \((.*)\))?$")


def parse_push_porcelain(text: str) -> list[RefUpdate]:
    out = []
    # A rejection's reason is the remote's own text ("ng REF REASON"): its control
    # characters are masked before it reaches a message on the user's terminal.
    for line in UNPRINTABLE.sub("?", text).splitlines():
        m = _PORCELAIN.match(line)
        if m:
            out.append(RefUpdate(m.group(1), m.group(2), m.group(3), m.group(4).strip(), m.group(5)))
    return out


@dataclass
class PushResult:
    remote: str
    branch: str
    remote_branch: str
    oid: bytes
    status: str  # "new", "fast-forward", "forced", "up-to-date"
    links: int  # links sent along (new on the remote)
    updates: list[RefUpdate] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "remote": self.remote,
            "branch": self.branch,
            "remote_branch": self.remote_branch,
            "id": self.oid.hex(),
            "status": self.status,
            "links": self.links,
        }


def push(
    repo: Repository,
    env: Mapping[str, str],
    remote: str | None = None,
    branch: str | None = None,
    *,
    force: bool = False,
    allow_secrets: bool = False,
    gate: Gate,
) -> PushResult:
    """Push state branch ``branch`` (default: the current one) and its links to ``remote``.

    ``branch`` may be ``LOCAL:REMOTE_NAME``. A remote branch that moved on is never
    overwritten: the push fails with git's reason. ``force`` overwrites it only if it
    still holds what the last fetch saw (git's ``--force-with-lease``). ``gate`` is
    called with the state to send (and ``allow=allow_secrets``) before anything is.
    """
    r = get_remote(repo, remote)
    spec = branch or repo.refs.head_branch()
    local, sep, rb = spec.partition(":")
    check_branch_name(local)
    rb = check_branch_name(rb) if sep else remote_branch_name(repo, local)
    oid = repo.refs.get(branch_ref(local))
    if oid is None:
        raise RevisionError(f"branch {local} has no commits yet, so there is nothing to push", hint="run 'opal commit' first")
    # Nothing leaves the machine with a secret in clear (say, committed before a rule
    # existed): every state the push sends is scanned first.
    gate(repo, oid, allow=allow_secrets)
    dst = branch_ref(rb)
    track = tracking_ref(r.name, rb) if r.name else None
    tracked = repo.refs.get(track) if track else None

    history = ancestors(repo, [oid])
    known = {}
    if r.name:
        prefix = f"{REMOTE_LINK_PREFIX}{r.name}/"
        known = {n[len(prefix) :]: v for n, v in repo.refs.all().items() if n.startswith(prefix)}
    links = sorted((code, state) for code, state in local_links(repo).items() if state in history and known.get(code.hex()) != state)

    main_spec = f"{oid.hex()}:{dst}"
    lease = [f"--force-with-lease={dst}:{tracked.hex() if tracked else ''}"] if force else []
    link_specs = [f"{state.hex()}:{link_ref(code)}" for code, state in links]
    chunks = [link_specs[i : i + PUSH_CHUNK] for i in range(0, len(link_specs), PUSH_CHUNK)] or [[]]
    updates: list[RefUpdate] = []
    for i, chunk in enumerate(chunks):
        specs = ([main_spec] if i == 0 else []) + chunk
        updates += _push_once(repo, env, r, specs, lease if i == 0 else [], rb=rb, local=local)

    main = next((u for u in updates if u.dst == dst), None)
    status = {" ": "fast-forward", "+": "forced", "*": "new", "=": "up-to-date"}.get(main.flag if main else "=", "fast-forward")
    pushed_links = [(code, state) for code, state in links if any(u.dst == link_ref(code) and u.flag in " +*=" for u in updates)]
    if r.name:
        changes: dict[str, tuple[bytes | None, bytes | None]] = {}
        with repo.lock():
            now = repo.refs.all()
            if now.get(track) != oid:
                changes[track] = (now.get(track), oid)
            for code, state in pushed_links:
                name = remote_link_ref(r.name, code)
                if now.get(name) != state:
                    changes[name] = (now.get(name), state)
            if changes:
                op = oplog.new(repo, "push", f"push {local} to {r.name}/{rb} ({status})", changes)
                oplog.apply(repo, op)
    new_links = sum(1 for code, _ in pushed_links if any(u.dst == link_ref(code) and u.flag != "=" for u in updates))
    return PushResult(r.label, local, rb, oid, status, new_links, updates)


def _push_once(repo: Repository, env: Mapping[str, str], r: Remote, specs: list[str], lease: list[str], *, rb: str, local: str) -> list[RefUpdate]:
    base = ["push", "--porcelain", "--no-verify", "--no-follow-tags", "--recurse-submodules=no", *lease]
    # The remote and the refspecs are operands, after '--': a remote's URL is never an option.
    proc = run_git(repo, [*base, "--atomic", "--", r.target, *specs], env)
    if proc.returncode and "does not support --atomic" in (proc.stderr or ""):
        proc = run_git(repo, [*base, "--", r.target, *specs], env)
    updates = parse_push_porcelain(proc.stdout or "")
    if proc.returncode and not updates:
        raise RemoteError(
            f"cannot push to {r.label}: {git_message(proc)}",
            hint=f"nothing was changed; check the remote and your access ('{cmdline('git', 'ls-remote', r.target)}'), then run the command again",
        )
    rejected = [u for u in updates if not u.ok]
    if rejected:
        first = next((u for u in rejected if u.reason != "atomic push failed"), rejected[0])
        raise _rejection(r, first, rb=rb, local=local, atomic=len(rejected) > 1 or first is not rejected[0])
    if proc.returncode:
        raise RemoteError(
            f"pushing to {r.label} failed: {git_message(proc)}",
            hint=f"run '{cmdline('opal', 'fetch', r.name) if r.name else 'opal fetch'}' to see what the remote holds, then try again",
        )
    return updates


def _rejection(r: Remote, u: RefUpdate, *, rb: str, local: str, atomic: bool) -> PushRejectedError:
    what = f"state branch {rb}" if u.dst.startswith(BRANCH_PREFIX) else f"link {u.dst[len(LINK_PREFIX):][:12]}" if u.dst.startswith(LINK_PREFIX) else u.dst
    reason = u.reason or u.summary
    where = r.label
    untouched = " Nothing was pushed." if atomic or u.dst.startswith(BRANCH_PREFIX) else ""
    if reason in ("fetch first", "non-fast-forward"):
        return PushRejectedError(
            f"{where} refused {what}: not a fast-forward ({reason}); someone else pushed to it.{untouched}",
            hint=f"run '{cmdline('opal', 'pull', where, rb)}' to bring their states in (or '{cmdline('opal', 'fetch', where)}' "
            f"and '{cmdline('opal', 'merge', f'{where}/{rb}')}'), then push again; 'opal push --force' would overwrite theirs",
        )
    if reason == "stale info":
        return PushRejectedError(
            f"{where} refused to overwrite {what}: it changed since your last fetch (stale info).{untouched}",
            hint=f"run '{cmdline('opal', 'fetch', where)}' and look at {where}/{rb} before forcing again",
        )
    return PushRejectedError(
        f"{where} refused {what}: {u.summary.strip('[]')}{' (' + u.reason + ')' if u.reason else ''}.{untouched}",
        hint="the remote's rules or hooks refused it; see the reason above",
    )
