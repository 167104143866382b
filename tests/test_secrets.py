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

from opalgit import codec, exporting, porcelain, redaction, remote
from opalgit.adapters.claude import ClaudeAdapter
from opalgit.repo import Repository
from tests.conftest import FIXTURES, git
from tests.core.test_porcelain import place

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
    assert any("secret(s) replaced" in n for n in res.notes)
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
    remote.push(repo, env, "origin")
    assert leaked(every_object_text(str(bare))) == set()

    # A state committed with redaction off (as before a rule existed) is refused.
    repo.config["secrets.redact"] = "false"
    porcelain.switch(repo, "raw", create=True)
    porcelain.rewind(repo, 1)
    porcelain.commit(repo, env, str(project), file=SESSION, agent="claude")
    with pytest.raises(redaction.SecretsFoundError) as err:
        remote.push(repo, env, "origin", "raw")
    assert "in clear" in str(err.value)
    assert any(leak["turn"] in str(err.value) for leak in redaction.scan_states(repo, [porcelain.resolve(repo, "raw").oid]).leaks)
    assert "opal secrets scan" in err.value.hint
    assert git("--git-dir", str(bare), "for-each-ref", "refs/opal/heads/raw", check=False).stdout == ""
    remote.push(repo, env, "origin", "raw", allow_secrets=True)  # the owner's explicit choice


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
