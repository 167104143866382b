"""Sharing state through git remotes: push, fetch, pull, clone-state.

State branches travel as ordinary refs over git's own protocols, by running the real
``git`` binary (``git push`` / ``git fetch``), so that every remote the user's git can
reach works with the user's own credentials: ssh config and agent, credential
helpers, ``insteadOf`` rewrites, proxies. libgit2's push would need credential
callbacks that re-implement all of that, and it returns normally when the remote
refuses a ref (the per-ref status must be read separately); ``git push --porcelain``
reports every ref, and a rejection here is always an error with git's reason.

Refs on the remote and their local counterparts::

    remote refs/opal/heads/<name>   <->  refs/opal/remotes/<remote>/<name>         (remote-tracking)
    remote refs/opal/links/<code>   <->  refs/opal/remote-links/<remote>/<code>    (see links.py)

The operation log (``refs/opal/oplog``) is never pushed: it is each user's own
history of what they did, like git's reflog. A push sends one state branch and the
links whose states are in its history, atomically where the remote supports it.
A fetch stages the remote's refs under ``refs/opal/fetching/<nonce>/`` (so no
``git gc`` can take the objects meanwhile, and the user's ``FETCH_HEAD`` stays
untouched), then moves them to the remote-tracking refs by compare-and-swap in one
operation of the log, so ``opal undo`` undoes a fetch or a pull like anything else.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from typing import Mapping

import pygit2

from opalgit.errors import ConflictError, OpalError, RevisionError, UsageError
from opalgit.history import oplog
from opalgit.store import gitcmd
from opalgit.store.argv import check_url
from opalgit.store.argv import command as cmdline
from opalgit.store.refs import BRANCH_PREFIX, NAMESPACE, REMOTE_PREFIX, branch_ref, check_branch_name
from opalgit.store.repo import Repository
from opalgit.structs import dataclass, field
from opalgit.sync.links import LINK_PREFIX, REMOTE_LINK_PREFIX, link_ref, local_links, remote_link_ref

TRACK_PREFIX = REMOTE_PREFIX
STAGING_PREFIX = NAMESPACE + "fetching/"
#: Refspecs per ``git push`` run (keeps the command line far below the OS limit).
PUSH_CHUNK = 500



class RemoteError(OpalError, ConnectionError):
    """A remote that is down, unreachable, or refuses to talk (nothing was changed)."""


class PushRejectedError(ConflictError):
    """The remote refused a ref (not a fast-forward, a hook, permissions); nothing was changed."""


# ------------------------------------------------------------------ running git


def run_git(repo: Repository, args: list[str], env: Mapping[str, str], *, input: str | None = None) -> subprocess.CompletedProcess:
    """Run the user's git on this repository."""
    try:
        return gitcmd.run(
            repo.git_dir, args, cwd=repo.workdir if repo.workdir and os.path.isdir(repo.workdir) else None,
            env=env, input=input,
        )
    except gitcmd.GitMissing:
        raise OpalError("git is not installed (or not on PATH)", hint="install git, then run the command again") from None


_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _git_message(proc: subprocess.CompletedProcess) -> str:
    """The most telling line of what git said on failure.

    Control characters are masked: the line may be the remote's own words
    ("remote: error: ..."), and a hostile server's escape sequences must not reach
    the user's terminal through opal's message."""
    text = _UNPRINTABLE.sub("?", proc.stderr or "")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("error: failed to push some refs")]
    # ssh says why before git's generic "Could not read from remote repository".
    for ln in lines:
        if ln.startswith("ssh: ") or "Permission denied" in ln or "Host key verification failed" in ln:
            return ln
    for prefix in ("fatal: ", "error: ", "remote: error: "):
        for i, ln in enumerate(lines):
            if ln.startswith(prefix):
                msg = ln[len(prefix) :] if prefix != "remote: error: " else ln
                if msg.endswith(":") and i + 1 < len(lines):  # "unable to connect to HOST:" + the reason
                    msg += " " + lines[i + 1]
                return msg
    return lines[-1] if lines else f"git exited with status {proc.returncode}"


# ------------------------------------------------------------------ remotes


@dataclass(frozen=True)
class Remote:
    name: str | None  # None: a bare URL (no remote-tracking refs are kept for it)
    target: str  # what git is given: the remote's name, or its URL
    url: str | None = None

    @property
    def label(self) -> str:
        return self.name or self.target


def _git_remotes(repo: Repository) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    try:
        for r in repo.git.remotes:
            out[r.name] = r.url
    except pygit2.GitError:
        pass
    return out


def _opal_remotes(repo: Repository) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in repo.config:
        m = re.match(r"^remote\.(.+)\.url$", entry.name)
        if m:
            out[m.group(1)] = entry.value
    return out


def remote_names(repo: Repository) -> list[str]:
    return sorted(set(_git_remotes(repo)) | set(_opal_remotes(repo)))


def _check_remote_name(name: str) -> str:
    if not name or name.startswith((".", "-")) or not pygit2.reference_is_valid_name(f"{TRACK_PREFIX}{name}/x"):
        raise UsageError(
            f"{name!r} cannot be used as a remote name",
            hint="use letters, digits, '-', '_' and '.', not first '-' or '.' (a git remote is renamed with 'git remote rename')",
        )
    return name


def _looks_like_url(text: str) -> bool:
    """A URL, an scp-like ``host:path``, or a local path: what git accepts in place of a remote name."""
    if "://" in text or text.startswith(("/", "./", "../", "~")) or os.path.exists(text):
        return True
    colon, slash = text.find(":"), text.find("/")
    return colon > 0 and (slash < 0 or colon < slash)


def get_remote(repo: Repository, name: str | None = None) -> Remote:
    """The remote ``name`` (a git remote, or one of opal's own), or the default one.

    The default is the upstream remote of the current git branch, else ``origin``,
    else the only remote there is. Whatever git is then given is checked first
    (:func:`argv.check_url`): a URL from opal's config or the command line that git
    would read as an option, or whose transport runs a command, is refused.
    """
    git_remotes = _git_remotes(repo)
    own = _opal_remotes(repo)
    if name is None:
        name = _default_remote_name(repo, git_remotes, own)
    if name in git_remotes:
        # git is given the name, never the URL: git reads the URL itself, under its own rules.
        return Remote(_check_remote_name(name), name, git_remotes[name])
    if name in own:
        # Written by 'opal config' (checked there), by hand, or by an older opal that did not check.
        url = check_url(own[name], source=f"remote.{name}.url in {os.path.join(repo.opal_dir, 'config')}")
        return Remote(_check_remote_name(name), url, url)
    if name.startswith("-") or _looks_like_url(name):
        return Remote(None, check_url(name, source="given as the remote"), name)
    known = ", ".join(sorted(set(git_remotes) | set(own))) or "none"
    raise UsageError(
        f"no remote named {name!r} (remotes: {known})",
        hint="add one with 'git remote add NAME URL', or for state only 'opal config remote.NAME.url URL'",
    )


def _default_remote_name(repo: Repository, git_remotes: Mapping[str, str | None], own: Mapping[str, str]) -> str:
    if not repo.own and not repo.git.head_is_detached and not repo.git.head_is_unborn:
        try:
            upstream = repo.git.config[f"branch.{repo.git.head.shorthand}.remote"]
        except (KeyError, pygit2.GitError):
            upstream = None
        if upstream and upstream != "." and (upstream in git_remotes or upstream in own):
            return upstream
    if "origin" in git_remotes or "origin" in own:
        return "origin"
    every = sorted(set(git_remotes) | set(own))
    if len(every) == 1:
        return every[0]
    raise UsageError(
        "no remote given, and there is no 'origin'" + (f" (remotes: {', '.join(every)})" if every else ""),
        hint="name one: 'opal push REMOTE', or add one with 'git remote add origin URL'",
    )


def namespace(repo: Repository) -> str | None:
    """The ``push.namespace`` prefix of your branches on remotes, if you set one."""
    value = (repo.config_get("push.namespace") or "").strip().strip("/")
    if not value:
        return None
    if value == "user":
        sig = repo.signature()
        local = sig.email.split("@", 1)[0] if sig.email and "@" in sig.email else sig.name
        value = re.sub(r"[^A-Za-z0-9._-]+", "-", local).strip("-.").lower() or "user"
    check_branch_name(value)
    return value


def remote_branch_name(repo: Repository, local: str) -> str:
    """The name a local branch has on remotes: itself, under your namespace if you set one."""
    ns = namespace(repo)
    return f"{ns}/{local}" if ns else local


def tracking_ref(remote: str, branch: str) -> str:
    return f"{TRACK_PREFIX}{remote}/{branch}"


def resolve_remote_branch(repo: Repository, name: str) -> bytes | None:
    """``origin/try-sqlite`` (or ``remotes/origin/try-sqlite``): the remote-tracking state branch, if any."""
    if name.startswith("remotes/"):
        name = name[len("remotes/") :]
    if "/" not in name:
        return None
    try:
        return repo.refs.get(TRACK_PREFIX + name)
    except ValueError:
        return None


def remote_branches(repo: Repository, remote: str | None = None) -> dict[str, bytes]:
    """Remote-tracking state branches: ``origin/main`` -> state commit."""
    out: dict[str, bytes] = {}
    prefix = TRACK_PREFIX + (f"{remote}/" if remote else "")
    for name, oid in repo.refs.all().items():
        if name.startswith(prefix):
            out[name[len(TRACK_PREFIX) :]] = oid
    return dict(sorted(out.items()))


def _is_ancestor(repo: Repository, ancestor: bytes, of: bytes) -> bool:
    if ancestor == of:
        return True
    try:
        return repo.git.descendant_of(pygit2.Oid(raw=of), pygit2.Oid(raw=ancestor))
    except pygit2.GitError:
        return False


def _history(repo: Repository, head: bytes) -> set[bytes]:
    from opalgit.history.revision import ancestors

    return ancestors(repo, [head])


# ------------------------------------------------------------------ push


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
    for line in _UNPRINTABLE.sub("?", text).splitlines():
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
) -> PushResult:
    """Push state branch ``branch`` (default: the current one) and its links to ``remote``.

    ``branch`` may be ``LOCAL:REMOTE_NAME``. A remote branch that moved on is never
    overwritten: the push fails with git's reason. ``force`` overwrites it only if it
    still holds what the last fetch saw (git's ``--force-with-lease``).
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
    from opalgit.porcelain.secrets import gate

    gate(repo, oid, allow=allow_secrets)
    dst = branch_ref(rb)
    track = tracking_ref(r.name, rb) if r.name else None
    tracked = repo.refs.get(track) if track else None

    history = _history(repo, oid)
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
            f"cannot push to {r.label}: {_git_message(proc)}",
            hint=f"nothing was changed; check the remote and your access ('{cmdline('git', 'ls-remote', r.target)}'), then run the command again",
        )
    rejected = [u for u in updates if not u.ok]
    if rejected:
        first = next((u for u in rejected if u.reason != "atomic push failed"), rejected[0])
        raise _rejection(r, first, rb=rb, local=local, atomic=len(rejected) > 1 or first is not rejected[0])
    if proc.returncode:
        raise RemoteError(
            f"pushing to {r.label} failed: {_git_message(proc)}",
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


# ------------------------------------------------------------------ fetch


@dataclass
class FetchResult:
    remote: str
    branches: dict[str, tuple[bytes | None, bytes | None]]  # remote branch -> (old, new); new None: gone
    links: int  # links that are new or changed
    op: bytes | None = None

    @property
    def changed(self) -> bool:
        return bool(self.branches) or self.links > 0

    def to_json(self) -> dict:
        return {
            "remote": self.remote,
            "branches": {b: {"old": o.hex() if o else None, "new": n.hex() if n else None} for b, (o, n) in self.branches.items()},
            "links": self.links,
        }


def _staging_groups(repo: Repository) -> dict[str, list[tuple[str, bytes]]]:
    groups: dict[str, list[tuple[str, bytes]]] = {}
    for name, oid in repo.refs.all().items():
        if name.startswith(STAGING_PREFIX):
            nonce = name[len(STAGING_PREFIX) :].split("/", 1)[0]
            groups.setdefault(nonce, []).append((name, oid))
    return groups


def _drop_staging(repo: Repository, refs: list[tuple[str, bytes]]) -> None:
    if refs:
        try:
            repo.refs.update({name: (oid, None) for name, oid in refs}, "opal fetch: drop staging refs")
        except OpalError:
            pass  # another run cleans up; staging refs only keep objects alive


def _clean_stale_staging(repo: Repository) -> None:
    """Staging refs of fetches that died (their process is gone)."""
    for nonce, refs in _staging_groups(repo).items():
        try:
            pid = int(nonce.split("-", 1)[0])
            os.kill(pid, 0)
            alive = pid != os.getpid()
        except (ValueError, ProcessLookupError):
            alive = False
        except PermissionError:
            alive = True
        if not alive:
            _drop_staging(repo, refs)


def fetch(repo: Repository, env: Mapping[str, str], remote: str | None = None) -> FetchResult:
    """Bring the remote's state branches and links into ``refs/opal/remotes/<remote>/``.

    The mirror is exact: a branch deleted on the remote is deleted here too (the
    operation log keeps it, ``opal undo`` brings it back). Local branches are never
    changed; see :func:`pull`.
    """
    return _fetch(repo, env, get_remote(repo, remote))


def _fetch(repo: Repository, env: Mapping[str, str], r: Remote) -> FetchResult:
    if r.name is None:
        raise UsageError(
            f"fetching needs a named remote, not a URL ({r.target})",
            hint="name it: 'git remote add NAME URL', or for state only 'opal config remote.NAME.url URL'",
        )
    _clean_stale_staging(repo)
    stage = f"{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}/"
    specs = [f"+{BRANCH_PREFIX}*:{stage}heads/*", f"+{LINK_PREFIX}*:{stage}links/*"]
    modern = ["--no-write-fetch-head", "--no-auto-maintenance"]  # git 2.29+: keep FETCH_HEAD, no gc
    base = ["fetch", "--quiet", "--no-tags", "--no-recurse-submodules"]
    # The remote and the refspecs are operands, after '--': a remote's URL is never an option.
    proc = run_git(repo, [*base, *modern, "--", r.target, *specs], env)
    if proc.returncode and "unknown option" in (proc.stderr or ""):
        proc = run_git(repo, [*base, "--", r.target, *specs], env)
    staged = [(n, o) for n, o in repo.refs.all().items() if n.startswith(stage)]
    if proc.returncode:
        _drop_staging(repo, staged)
        raise RemoteError(
            f"cannot fetch from {r.label}: {_git_message(proc)}",
            hint=f"nothing was changed; check the remote and your access ('{cmdline('git', 'ls-remote', r.target)}'), then run the command again",
        )
    heads = {n[len(stage + "heads/") :]: o for n, o in staged if n.startswith(stage + "heads/")}
    links = {n[len(stage + "links/") :]: o for n, o in staged if n.startswith(stage + "links/")}
    track = f"{TRACK_PREFIX}{r.name}/"
    ltrack = f"{REMOTE_LINK_PREFIX}{r.name}/"
    with repo.lock():
        now = repo.refs.all()
        changes: dict[str, tuple[bytes | None, bytes | None]] = {}
        branches: dict[str, tuple[bytes | None, bytes | None]] = {}
        for b, oid in heads.items():
            if now.get(track + b) != oid:
                changes[track + b] = (now.get(track + b), oid)
                branches[b] = (now.get(track + b), oid)
        for name, oid in now.items():
            if name.startswith(track) and name[len(track) :] not in heads:
                changes[name] = (oid, None)
                branches[name[len(track) :]] = (oid, None)
        nlinks = 0
        for code, oid in links.items():
            if now.get(ltrack + code) != oid:
                changes[ltrack + code] = (now.get(ltrack + code), oid)
                nlinks += 1
        for name, oid in now.items():
            if name.startswith(ltrack) and name[len(ltrack) :] not in links:
                changes[name] = (oid, None)
        cleanup = {name: (oid, None) for name, oid in staged}
        op_id = None
        if changes:
            parts = [f"{len(branches)} branch{'es' if len(branches) != 1 else ''}"]
            if nlinks:
                parts.append(f"{nlinks} link{'s' if nlinks != 1 else ''}")
            op = oplog.new(repo, "fetch", f"fetch {r.name}: {', '.join(parts)} updated", changes)
            op_id = oplog.apply(repo, op, extra_refs=cleanup).oid
        elif cleanup:
            repo.refs.update(cleanup, "opal fetch: drop staging refs")
    return FetchResult(r.name, dict(sorted(branches.items())), nlinks, op_id)


# ------------------------------------------------------------------ pull


@dataclass
class PullResult:
    fetch: FetchResult
    branch: str  # the local branch (the current one)
    remote_branch: str  # e.g. origin/main
    old: bytes | None
    new: bytes
    status: str  # "fast-forward", "created", "up-to-date", "ahead"
    left_out: int = 0  # turns of the branch the pull left out (only with force)
    session: str | None = None  # the session the branch tracks after the pull ("agent:id")
    retracked: bool = False  # the pull changed it

    def to_json(self) -> dict:
        return {
            "branch": self.branch,
            "from": self.remote_branch,
            "old": self.old.hex() if self.old else None,
            "new": self.new.hex(),
            "status": self.status,
            "turns_left_out": self.left_out,
            "session": self.session,
            "session_changed": self.retracked,
            "fetch": self.fetch.to_json(),
        }


@dataclass
class Moved:
    """What :func:`fast_forward` did to the local branch."""

    old: bytes | None
    new: bytes
    status: str  # "fast-forward", "created", "up-to-date", "ahead"
    left_out: int = 0
    session: str | None = None
    retracked: bool = False


def fast_forward(repo: Repository, local: str, remote: str, rb: str, *, command: str = "pull",
                 force: bool = False) -> Moved:
    """Move ``local`` to ``remote/rb`` if that is a fast-forward; never overwrites.

    A fast-forward by commits is one by turns too, or it needs ``force``: a state that
    descends from the branch's head may hold fewer of its turns (the teammate rewound
    or edited, then pushed). The branch then tracks the session the remote state was
    recorded from (:func:`merging.followed_session`), so the next ``opal commit`` does
    not record the session it tracked before over the pulled turns; the operation
    records both moves, and ``opal undo`` restores both.
    """
    from opalgit.history.states import load_state
    from opalgit.porcelain.merge import followed_session, turns_left_out  # the rules 'opal merge' fast-forwards by

    source = f"{remote}/{rb}"
    with repo.lock():
        new = repo.refs.get(tracking_ref(remote, rb))
        if new is None:
            have = ", ".join(remote_branches(repo, remote)) or "none"
            raise RevisionError(
                f"{remote} has no state branch {rb} (it has: {have})",
                hint=f"see '{cmdline('opal', 'fetch', remote)}'; push one with '{cmdline('opal', 'push', remote)}'",
            )
        old = repo.refs.get(branch_ref(local))
        if old == new:
            return Moved(old, new, "up-to-date", session=oplog.tracked(repo, local))
        if old is not None and _is_ancestor(repo, new, old):
            return Moved(old, new, "ahead", session=oplog.tracked(repo, local))
        if old is not None and not _is_ancestor(repo, old, new):
            raise ConflictError(
                f"{local} ({old.hex()[:7]}) and {source} ({new.hex()[:7]}) have diverged; nothing was changed",
                hint=f"run '{cmdline('opal', 'merge', source)}' to combine them (or '{cmdline('opal', 'branch', 'NAME', source)}' to keep theirs apart)",
            )
        st = load_state(repo, new)
        lost = 0
        if old is not None:
            so = load_state(repo, old)
            lost = turns_left_out(repo, so, st)
            if lost and not force:
                raise _fewer_turns(local, source, so.header.turns, st.header.turns, lost, command, remote, rb)
        session = followed_session(repo, st)
        status = "created" if old is None else "fast-forward"
        desc = f"{command} {source} into {local}: " + (f"create at {new.hex()[:7]}" if old is None else f"fast-forward {old.hex()[:7]}..{new.hex()[:7]}")
        if lost:
            desc += f", leaving out {lost} turn{'s' if lost != 1 else ''}"
        sessions = oplog.tracking_change(repo, local, session)
        op = oplog.new(repo, command, desc, {branch_ref(local): (old, new)}, sessions=sessions)
        oplog.apply(repo, op)
        return Moved(old, new, status, lost, session, bool(sessions))


def _fewer_turns(local: str, source: str, have: int, theirs: int, lost: int, command: str, remote: str,
                 rb: str) -> UsageError:
    """A fast-forward by commits that leaves out turns of ``local``: said, with the
    ways on (``opal merge`` would refuse the same move, so it is not one of them)."""
    return UsageError(
        f"{'pulling' if command == 'pull' else command} {source} into {local} would leave out {lost} of {local}'s "
        f"{have} turn{'s' if have != 1 else ''} ({source} has {theirs}: it was rewound or edited there since "
        f"{local} had it); nothing was changed",
        hint=f"to take {source} anyway ('opal undo' takes it back), run "
             f"'{cmdline('opal', 'pull', '--force', remote, rb)}'; to keep your turns and look at theirs apart, "
             f"'{cmdline('opal', 'branch', 'NAME', source)}'",
    )


def pull(repo: Repository, env: Mapping[str, str], remote: str | None = None, branch: str | None = None, *,
         force: bool = False) -> PullResult:
    """Fetch, then fast-forward the current branch to ``remote/branch``.

    ``branch`` is the name on the remote (default: the current branch's, under your
    ``push.namespace``). Diverged histories are refused, never overwritten; a
    fast-forward that would leave out turns of the branch needs ``force``.
    """
    r = get_remote(repo, remote)
    fres = _fetch(repo, env, r)
    assert r.name is not None  # _fetch refuses a bare URL
    local = repo.refs.head_branch()
    rb = check_branch_name(branch) if branch else remote_branch_name(repo, local)
    m = fast_forward(repo, local, r.name, rb, force=force)
    return PullResult(fres, local, f"{r.name}/{rb}", m.old, m.new, m.status, m.left_out, m.session, m.retracked)


# ------------------------------------------------------------------ clone-state


@dataclass
class CloneResult:
    remote: str
    added: bool  # the remote was added to opal's config
    fetch: FetchResult
    branch: str
    status: str | None  # what happened to the current branch: "created", "up-to-date", ... or None
    branches: dict[str, bytes]

    def to_json(self) -> dict:
        return {
            "remote": self.remote,
            "added": self.added,
            "branch": self.branch,
            "status": self.status,
            "branches": {b: o.hex() for b, o in self.branches.items()},
        }


def _same_url(a: str | None, b: str) -> bool:
    def norm(u: str) -> str:
        u = u.strip().rstrip("/")
        return u[:-4] if u.endswith(".git") else u

    return a is not None and norm(a) == norm(b)


def clone_state(repo: Repository, env: Mapping[str, str], url: str, name: str | None = None) -> CloneResult:
    """Get the state kept at ``url`` into this (freshly cloned) repository.

    The remote is the git remote with that URL if there is one; otherwise it is
    recorded in opal's own config only (``remote.<name>.url``), so your code
    remotes are untouched. The current branch, if it has no commits yet, starts at
    the remote's branch of the same name.
    """
    check_url(url, source="given to clone-state")
    again = ["opal", "clone-state", url, *(["--name", name] if name else [])]
    git_remotes = _git_remotes(repo)
    own = _opal_remotes(repo)
    match = next((n for n, u in sorted(git_remotes.items()) if _same_url(u, url)), None)
    match = match or next((n for n, u in sorted(own.items()) if _same_url(u, url)), None)
    if name is None:
        name = match or ("origin" if "origin" not in git_remotes and "origin" not in own else None)
        if name is None:
            raise UsageError(
                f"'origin' already names another remote ({git_remotes.get('origin') or own.get('origin')})",
                hint=f"give the state remote a name: '{cmdline('opal', 'clone-state', url, '--name', 'NAME')}'",
            )
    _check_remote_name(name)
    added = name != match
    if added:
        existing = git_remotes.get(name) or own.get(name)
        if existing is not None:
            raise UsageError(f"remote {name} already exists with URL {existing}", hint="pick another name with --name")
    r = Remote(name, url, url) if added else get_remote(repo, name)
    try:
        fres = _fetch(repo, env, r)
    except RemoteError as exc:
        # The remote is recorded only once its state is here: a wrong URL or a remote
        # that is down leaves no 'origin' behind that the next try would trip over.
        raise RemoteError(
            exc.message,
            hint=f"no remote was recorded and nothing was fetched; check the URL and your access "
            f"('{cmdline('git', 'ls-remote', url)}'), then run '{cmdline(*again)}' again",
        ) from None
    if added:
        repo.config[f"remote.{name}.url"] = url
    local = repo.refs.head_branch()
    rb = remote_branch_name(repo, local)
    status = None
    if repo.refs.get(branch_ref(local)) is None and repo.refs.get(tracking_ref(name, rb)) is not None:
        status = fast_forward(repo, local, name, rb, command="clone-state").status
    return CloneResult(name, added, fres, local, status, remote_branches(repo, name))


__all__ = [
    "FetchResult",
    "PullResult",
    "PushRejectedError",
    "PushResult",
    "Remote",
    "RemoteError",
    "CloneResult",
    "clone_state",
    "fetch",
    "get_remote",
    "namespace",
    "pull",
    "push",
    "remote_branch_name",
    "remote_branches",
    "resolve_remote_branch",
    "tracking_ref",
]
