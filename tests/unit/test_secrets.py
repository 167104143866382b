"""Secrets never leave the machine: redaction on commit, the local vault, the push gate.

The corpus holds 72 realistic fake credentials of 24 kinds inside a Claude Code
session (tests/fixtures/secrets/). After commit and push, every object of the local
repository and of the remote is decoded with opal's own codec and searched.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess

import pytest

from opalgit import codec, porcelain
from opalgit.agents.claude.adapter import ClaudeAdapter
from opalgit.porcelain import export as exporting
from opalgit.porcelain import secrets as redaction
from opalgit.porcelain.secrets import gate
from opalgit.store.repo import Repository
from opalgit.sync.push import push
from tests.conftest import FIXTURES, git
from tests.unit.test_porcelain import place

CORPUS = json.load(open(os.path.join(FIXTURES, "secrets", "corpus.json")))
SECRETS = [s["secret"] for s in CORPUS["secrets"]]
SESSION = os.path.join(FIXTURES, "secrets", "session.jsonl")


def every_object_text(git_dir: str) -> list[bytes]:
    """Every object of a repository, decoded the way opal decodes it (frames unpacked)."""
    listing = subprocess.run(
        ["git", "--git-dir", git_dir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")
    out = []
    for line in filter(None, listing):
        oid, kind = line.split()
        data = subprocess.run(["git", "--git-dir", git_dir, "cat-file", kind, oid], capture_output=True, check=True).stdout
        if data[:4] in (codec.MAGIC_RAW, codec.MAGIC_ZSTD):
            data = codec.unframe(data)
            # Turn and leaf bodies hold records as ordered msgpack inside msgpack: unpack fully.
            try:
                data = json.dumps(codec.unpack_plain(data), default=lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else repr(v), ensure_ascii=False).encode()
            except Exception:
                pass
        out.append(data)
    return out


def leaked(blobs: list[bytes]) -> set[str]:
    found = set()
    for s in SECRETS:
        needle = s.encode()
        short = needle[:24]  # a secret cut or re-escaped in JSON still shows its head
        if any(needle in b or (len(short) >= 16 and short in b) for b in blobs):
            found.add(s)
    return found


@pytest.fixture
def repo(project, home):
    porcelain.init(str(project))
    r = Repository.discover(str(project))
    place(home, project, source=SESSION)
    return r


def test_commit_redacts_every_secret_and_keeps_them_in_a_private_vault(repo, project, home):
    res = porcelain.commit(repo, {"HOME": str(home)}, str(project))
    assert any("replaced by placeholders" in n for n in res.notes)
    # Decompress everything the repository holds, nested msgpack included, and search it.
    git("gc", "-q", cwd=str(project))
    assert leaked(every_object_text(repo.common_dir + "/")) == set()
    vault = redaction.vault(repo)
    mode = stat.S_IMODE(os.stat(vault.path).st_mode)
    assert mode == 0o600
    assert set(vault.mapping().values()) >= set(SECRETS) - {s for s in SECRETS if len(s) < 8}
    scan = redaction.scan_states(repo, [res.oid])
    assert not scan.leaks
    kinds = {r["kind"] for r in scan.redacted}
    assert len(kinds) >= 20, kinds


def test_the_owners_export_restores_secrets_and_a_teammates_shows_placeholders(repo, project, home, tmp_path):
    porcelain.commit(repo, {"HOME": str(home)}, str(project))
    env = {"HOME": str(tmp_path / "export-home")}
    mine = exporting.export(repo, env, to="claude", cwd=str(project))
    written = open(mine.files[0], "rb").read()
    source = open(SESSION, "rb").read()
    sid = json.loads(source.splitlines()[0])["sessionId"]
    # Byte-identical to the source but for the new session id and folder (and a closing last-prompt).
    restored = written.replace(mine.session_id.encode(), sid.encode()).replace(str(project).encode(), b"/home/dev/acme")
    assert restored.startswith(source) or source.splitlines() == restored.splitlines()[: len(source.splitlines())]
    theirs = exporting.export(repo, env, to="claude", cwd=str(project), with_secrets=False)
    text = open(theirs.files[0], "rb").read()
    assert leaked([text]) == set() and b"opal-secret:" in text


def test_push_sends_no_secret_and_the_gate_refuses_clear_ones(repo, project, home, tmp_path):
    env = dict(os.environ, HOME=str(home))
    porcelain.commit(repo, env, str(project))
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare))
    git("remote", "add", "origin", str(bare), cwd=str(project))
    push(repo, env, "origin", gate=gate)
    assert leaked(every_object_text(str(bare))) == set()

    # A state committed with redaction off (as before a rule existed) is refused.
    repo.config["secrets.redact"] = "false"
    porcelain.switch(repo, "raw", create=True)
    porcelain.rewind(repo, 1)
    porcelain.commit(repo, env, str(project), file=SESSION, agent="claude")
    with pytest.raises(redaction.SecretsFoundError) as err:
        push(repo, env, "origin", "raw", gate=gate)
    assert "in clear" in str(err.value)
    assert any(leak["turn"] in str(err.value) for leak in redaction.scan_states(repo, [porcelain.resolve(repo, "raw").oid]).leaks)
    assert "opal secrets scan" in err.value.hint
    assert git("--git-dir", str(bare), "for-each-ref", "refs/opal/heads/raw", check=False).stdout == ""
    push(repo, env, "origin", "raw", allow_secrets=True, gate=gate)  # the owner's explicit choice


def test_user_rules_add_and_allow(repo, project, home):
    with open(redaction.rules_path(repo), "w") as fh:
        fh.write('[[rule]]\nname = "acme-ticket"\nregex = "ACME-TKT-[0-9]{8}"\n')
    f = project / "s.jsonl"
    line = {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s1", "timestamp": "2025-01-01T00:00:00Z",
            "message": {"role": "user", "content": "ticket ACME-TKT-12345678 please"}}
    f.write_text(json.dumps(line) + "\n")
    res = porcelain.commit(repo, {"HOME": str(home)}, str(project), file=str(f), agent="claude")
    shown = porcelain.show_turn(repo, res.oid, 1)
    assert "ACME-TKT-12345678" not in json.dumps(shown.to_json())
    assert "opal-secret:acme-ticket:" in json.dumps(shown.to_json())


def test_cli_secrets_scan_never_prints_a_secret(repo, project, home):
    from tests.conftest import opal

    porcelain.commit(repo, {"HOME": str(home)}, str(project))
    r = opal("secrets", "scan", cwd=project, env={"HOME": str(home)})
    assert r.returncode == 0 and "redacted" in r.stdout
    assert leaked([r.stdout.encode(), r.stderr.encode()]) == set()
    assert ClaudeAdapter  # the session is a Claude Code transcript


# ------------------------------------------------------------- recall, every place


def _recall_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("recall", os.path.join(FIXTURES, "secrets", "recall.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECALL = _recall_module()


def _recall_session(path: str, planted: list[dict], jwt_key: str, escaped: list[dict], compact: bool = True) -> None:
    """A Claude Code session holding every planted secret in every place a session
    can: the prompt, the reply, a tool input, a JSON-string argument, the output,
    an unknown field, base64 (a structured result, a wrapped tool output, quoted in a
    prompt), the JSON-escaped form, the title; a JWT as a JSON key; \\u- and
    \\/-escaped lines."""
    import base64 as b64
    import uuid as uuidlib

    records, parent, n = [], None, 0

    def rec(kind: str, message: dict, **extra) -> None:
        nonlocal parent, n
        n += 1
        uid = str(uuidlib.UUID(int=n))
        r = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/dev/acme",
             "sessionId": "5e5e5e5e-0000-4000-8000-000000000017", "version": "2.1.0", "gitBranch": "main",
             "type": kind, "message": message, "uuid": uid, "timestamp": f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}.000Z"}
        r.update(extra)
        records.append(r)
        parent = uid

    for i, e in enumerate(planted):
        ctx = e["context"]
        call = f"toolu_{i:024d}"
        rec("user", {"role": "user", "content": f"Why does this fail?\n{ctx}"}, x_unknown_field={"note": ctx})
        rec("assistant", {"id": f"msg_{i:024d}", "type": "message", "role": "assistant", "model": "claude-opus-4-1",
                          "content": [{"type": "text", "text": f"The config says:\n{ctx}\nEscaped: {json.dumps(ctx)}"},
                                      {"type": "tool_use", "id": call, "name": "Bash",
                                       "input": {"command": ctx, "args": json.dumps({"config": ctx})}}],
                          "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}})
        rec("user", {"role": "user", "content": [{"tool_use_id": call, "type": "tool_result", "content": ctx,
                                                   "is_error": False}]},
            toolUseResult={"stdout": ctx, "stderr": "", "encoded": b64.b64encode(ctx.encode()).decode()})
        # base64 as a tool prints it (wrapped at 76) and as a prompt quotes it
        wrapped = b64.encodebytes(f"# config.env\n{ctx}\n".encode()).decode()
        rec("user", {"role": "user", "content": [{"tool_use_id": call + "b", "type": "tool_result",
                                                   "content": f"$ base64 config.env\n{wrapped}", "is_error": False}]})
        rec("user", {"role": "user", "content": f"decode this base64: {b64.b64encode(ctx.encode()).decode()} please"})
    for e in escaped:
        rec("user", {"role": "user", "content": e["context"]})
    rec("user", {"role": "user", "content": "cache"}, x_cache={jwt_key: {"ok": True}})
    title = next(e for e in planted if e["kind"] == "groq-key")["secret"]
    records.append({"type": "custom-title", "customTitle": f"deploy with {title}", "sessionId": records[0]["sessionId"]})
    records.append({"type": "ai-title", "aiTitle": f"fix {planted[0]['secret']}", "sessionId": records[0]["sessionId"]})
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            # Compact, as Claude Code writes (stored as records); spaced lines are kept
            # as the bytes they are, and redacted as text.
            fh.write((json.dumps(r, separators=(",", ":"), ensure_ascii=False) if compact else json.dumps(r)) + "\n")


def _decoded_views(blobs: list[bytes]) -> list[str]:
    """Each object as text, also JSON-unescaped and with its base64 runs decoded."""
    import base64 as b64
    import re

    out = []
    for b in blobs:
        t = b.decode("utf-8", "replace")
        out.append(t)
        try:
            out.append(json.loads(f'"{t}"'.replace("\n", "\\n")) if "\\" in t else t)
        except ValueError:
            out.append(re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), t).replace("\\/", "/"))
        for run in re.findall(r"[A-Za-z0-9+/]{16,}={0,2}", t):
            try:
                out.append(b64.b64decode(run + "=" * (-len(run) % 4)).decode("utf-8", "replace"))
            except ValueError:
                pass
    return out


@pytest.mark.parametrize("compact,worker", [(True, False), (False, False), (True, True)],
                         ids=["records", "lines", "worker"])
def test_recall_every_kind_in_every_place_none_reaches_the_remote(repo, project, home, tmp_path, compact, worker,
                                                                  monkeypatch):
    """Issue 17: 0 of every listed kind on the remote, decoded from every object."""
    from opalgit.secrets import worker as redactworker

    if worker:  # the second process that redacts large imports (8 MB and more)
        monkeypatch.setattr(redactworker, "MIN_BYTES", 16)
    planted, escaped, jwt_key = RECALL.planted(), RECALL.escaped_source_lines(), RECALL.jwt_key()
    kinds = {e["kind"] for e in planted}
    assert len(kinds) >= 40, len(kinds)
    session = tmp_path / "recall.jsonl"
    _recall_session(str(session), planted, jwt_key, escaped, compact)
    env = dict(os.environ, HOME=str(home))
    porcelain.commit(repo, env, str(project), file=str(session), agent="claude")
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare))
    git("remote", "add", "origin", "file://" + str(bare), cwd=str(project))
    push(repo, env, "origin", gate=gate)
    views = _decoded_views(every_object_text(str(bare)))
    # (base64 of a context is planted whole; what decoding the remote's objects shows is searched)
    leaked_kinds: dict[str, int] = {}
    for e in planted + escaped + [{"kind": "jwt", "secret": jwt_key}]:
        if any(e["secret"] in v for v in views):
            leaked_kinds[e["kind"]] = leaked_kinds.get(e["kind"], 0) + 1
    assert leaked_kinds == {}, leaked_kinds
    assert not redaction.scan_states(repo, [porcelain.resolve(repo, "HEAD").oid]).leaks


def test_near_misses_are_left_alone():
    from opalgit.secrets.redact import Redactor

    r = Redactor(key=bytes(range(32)))
    flagged = [t for t in RECALL.NEAR_MISSES if r.redact_text(t)[1]]
    assert flagged == [], flagged


# ------------------------------------------- titles, messages, names (issue 17, item 2)

TITLE_SECRET = "gsk_" + "Q7zK2m9WB4vN8rD1xP5cT3hL6jF0yS8aE2uG4iO7kM1nR9bV3wZ5"  # 52 after gsk_


def _with_title(tmp_path, agent: str) -> str:
    """A copy of an agent's fixture whose last line sets the session's title."""
    if agent == "claude":
        src, line = SESSION, {"type": "custom-title", "customTitle": f"deploy with {TITLE_SECRET}",
                              "sessionId": json.loads(open(SESSION).readline())["sessionId"]}
    elif agent == "codex":
        src = os.path.join(FIXTURES, "codex", "agent-sessions", "small.jsonl")
        line = {"timestamp": "2026-01-01T00:00:00.000Z", "type": "event_msg",
                "payload": {"type": "thread_name_updated", "thread_id": "t1", "thread_name": f"deploy {TITLE_SECRET}"}}
    else:
        src = os.path.join(FIXTURES, "gemini", "generated", "session-2026-11-30T12-25-aaf40a27.jsonl")
        line = {"$set": {"summary": f"deploy {TITLE_SECRET}"}}
    folder = tmp_path / agent
    folder.mkdir()
    dst = folder / os.path.basename(src)
    dst.write_bytes(open(src, "rb").read().rstrip(b"\n") + b"\n" + json.dumps(line).encode() + b"\n")
    return str(dst)


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_session_titles_are_redacted_in_the_state_header(repo, project, home, tmp_path, agent):
    # Claude's custom-title, Codex's thread_name, Gemini's $set.summary: kept in
    # source.state.info.title (and the session's title), pushed in clear before.
    path = _with_title(tmp_path, agent)
    res = porcelain.commit(repo, {"HOME": str(home)}, str(project), file=path, agent=agent)
    header = porcelain.load_state(repo, res.oid).header
    stored = json.dumps(redaction.header_values(header), default=repr)
    assert TITLE_SECRET not in stored and "opal-secret:groq-key:" in stored
    git("gc", "-q", cwd=str(project))
    assert not any(TITLE_SECRET.encode() in b for b in every_object_text(repo.common_dir + "/"))
    assert TITLE_SECRET in redaction.vault(repo).mapping().values()
    # The next commit reads the title back from the state: still the placeholder, no error.
    with open(path, "ab") as fh:
        fh.write(b"\n" if agent == "never" else b"")
    assert not redaction.scan_states(repo, [res.oid]).leaks


def test_messages_squash_text_and_branch_names(repo, project, home):
    from opalgit.errors import UsageError
    from opalgit.porcelain.squash import squash

    res = porcelain.commit(repo, {"HOME": str(home)}, str(project), message=f"import, key {TITLE_SECRET}\n")
    assert TITLE_SECRET not in repo.store.read_commit(res.oid).message
    edit = squash(repo, "HEAD:1..HEAD:2", f"we rotated {TITLE_SECRET} after this")
    shown = json.dumps(porcelain.show_turn(repo, edit.oid, 1).to_json())
    assert TITLE_SECRET not in shown and "opal-secret:groq-key:" in shown
    assert TITLE_SECRET not in repo.store.read_commit(edit.oid).message
    with pytest.raises(UsageError) as err:
        porcelain.branch_create(repo, f"fix-{TITLE_SECRET}")
    assert "holds a secret" in str(err.value) and TITLE_SECRET not in str(err.value)
    git("gc", "-q", cwd=str(project))
    assert not any(TITLE_SECRET.encode() in b for b in every_object_text(repo.common_dir + "/"))


def test_scan_exits_9_on_a_secret_in_clear_and_looks_at_headers(repo, project, home, tmp_path):
    from tests.conftest import opal

    repo.config["secrets.redact"] = "false"
    porcelain.commit(repo, {"HOME": str(home)}, str(project), file=_with_title(tmp_path, "codex"), agent="codex")
    r = opal("secrets", "scan", "--json", cwd=project, env={"HOME": str(home)})
    assert r.returncode == 9, r.stderr
    leaks = json.loads(r.stdout)["in_clear"]
    assert any(leak["turn"].endswith(" header") and leak["kind"] == "groq-key" for leak in leaks)
    assert TITLE_SECRET not in r.stdout + r.stderr
    assert opal("secrets", "scan", cwd=project, env={"HOME": str(home)}).returncode == 9


# ------------------------------------------------------------- purge (issue 17, item 6)


def test_purge_takes_clear_secrets_out_of_history_push_then_passes_and_undo_restores(repo, project, home, tmp_path):
    from opalgit.porcelain import drop as cleanup
    from tests.conftest import opal

    env = dict(os.environ, HOME=str(home))
    repo.config["secrets.redact"] = "false"  # as before a rule existed: committed in clear
    porcelain.commit(repo, env, str(project), message=f"import {TITLE_SECRET}\n")
    cleanup.drop(repo, "HEAD:1..HEAD:1")  # a second state on top of the first
    repo.config["secrets.redact"] = "true"
    before = porcelain.resolve(repo, "HEAD").oid
    assert opal("secrets", "scan", cwd=project, env={"HOME": str(home)}).returncode == 9
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare))
    git("remote", "add", "origin", "file://" + str(bare), cwd=str(project))
    with pytest.raises(redaction.SecretsFoundError) as err:
        push(repo, env, "origin", gate=gate)
    assert "opal secrets purge" in err.value.hint  # the way out the hint names is real

    plan = redaction.purge(repo, dry_run=True)
    assert plan.states == 2 and porcelain.resolve(repo, "HEAD").oid == before  # a dry run changes nothing
    r = opal("secrets", "purge", "--json", cwd=project, env={"HOME": str(home)})
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["states_rewritten"] == 2 and res["secrets"] >= len(set(SECRETS)) // 2
    assert leaked([r.stdout.encode(), r.stderr.encode()]) == set()
    after = porcelain.resolve(repo, "HEAD").oid
    assert after != before and not redaction.scan_states(repo, [after]).leaks
    assert opal("secrets", "scan", cwd=project, env={"HOME": str(home)}).returncode == 0
    # As if redacted at commit time: the vault holds the secrets, the owner's export puts them back.
    assert set(SECRETS) - {s for s in SECRETS if len(s) < 8} <= set(redaction.vault(repo).mapping().values())
    mine = exporting.export(repo, {"HOME": str(tmp_path / "x")}, to="claude", cwd=str(project))
    assert any(s.encode() in open(mine.files[0], "rb").read() for s in SECRETS)
    # The old author and the first state's header are kept; the history has as many states.
    old, new = repo.store.read_commit(before), repo.store.read_commit(after)
    assert (old.author, old.committer) == (new.author, new.committer)
    assert len(new.parents) == 1 and TITLE_SECRET not in repo.store.read_commit(new.parents[0]).message

    push(repo, env, "origin", gate=gate)
    assert leaked(every_object_text(str(bare))) == set()
    assert TITLE_SECRET.encode() not in b"".join(every_object_text(str(bare)))

    porcelain.undo(repo, res["op"])  # recorded in the op log: the old states come back
    assert porcelain.resolve(repo, "HEAD").oid == before
    assert redaction.purge(repo).states == 2  # and can be purged again


def test_purge_with_nothing_in_clear_changes_nothing(repo, project, home):
    porcelain.commit(repo, {"HOME": str(home)}, str(project))
    head = porcelain.resolve(repo, "HEAD").oid
    res = redaction.purge(repo)
    assert res.branches == {} and res.op is None and porcelain.resolve(repo, "HEAD").oid == head


def test_tool_names_and_call_ids_with_a_secret_stay_out_of_the_turn_summaries(repo, project, home, tmp_path):
    # The summary beside each turn ('opal log --turns': tool, calls, results) is made
    # from the record as read; it held them in clear.
    sid = "5e5e5e5e-0000-4000-8000-000000000021"
    base = {"isSidechain": False, "userType": "external", "cwd": "/home/dev/acme", "sessionId": sid,
            "version": "2.1.0", "gitBranch": "main", "timestamp": "2026-01-01T00:00:00.000Z"}
    call = f"toolu_{TITLE_SECRET}"
    lines = [
        dict(base, type="user", uuid="u1", parentUuid=None, message={"role": "user", "content": "go"}),
        dict(base, type="assistant", uuid="a1", parentUuid="u1", message={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-4-1",
            "content": [{"type": "tool_use", "id": call, "name": f"mcp__{TITLE_SECRET}", "input": {}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}}),
        dict(base, type="user", uuid="u2", parentUuid="a1", message={"role": "user", "content": [
            {"tool_use_id": call, "type": "tool_result", "content": "ok", "is_error": False}]}),
    ]
    f = tmp_path / "tools.jsonl"
    f.write_text("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines))
    res = porcelain.commit(repo, {"HOME": str(home)}, str(project), file=str(f), agent="claude")
    git("gc", "-q", cwd=str(project))
    assert not any(TITLE_SECRET.encode() in b for b in every_object_text(repo.common_dir + "/"))
    assert not redaction.scan_states(repo, [res.oid]).leaks
