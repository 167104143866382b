"""The redaction worker of large imports (opalgit.secrets.worker).

What must hold: a commit made with the worker's verdicts is the commit made without
them, object for object, vault entry for vault entry; whatever the worker does
(dies at once, stops half-way, judges a file that changed), every record is still
redacted; and the worker never outlives the commit, failed or not.

The commits run in a fresh Python process each: the worker is only forked from a
process without other threads, which a pytest process that has run server tests may
not be.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import msgpack
import pytest

from opalgit import jsonl
from opalgit.agents.claude.adapter import ClaudeAdapter
from opalgit.secrets import worker as redactworker
from opalgit.secrets.worker import Screen
from tests.conftest import ROOT, git

# Runs one commit of --file in a repository; prints what the test compares.
SCRIPT = r"""
import json, os, sys
from opalgit import porcelain
from opalgit.history import sequence
from opalgit.porcelain import secrets as redaction
from opalgit.secrets import worker as redactworker
from opalgit.store.repo import Repository

repo_dir, path, mode = sys.argv[1:4]
redactworker.MIN_BYTES = 1 << 60 if mode == "off" else 0
started = []
real_start = redactworker.start

def start(*args, **kw):
    screen = real_start(*args, **kw)
    started.append(screen)
    started.append(screen._pid)
    if mode in ("on", "half") and screen._pid is not None:
        # Wait for every verdict before the first record is stored, so that what
        # the commit used does not depend on which process ran faster.
        os.waitpid(screen._pid, 0)
        screen._pid = None  # reaped here
        screen._thread.join()
        started[1] = None
        started.append("waited")
    return screen

redactworker.start = start
if mode == "dies":
    redactworker._judge = lambda *a: os._exit(3)
elif mode == "behind":
    # A worker slower than the commit: the commit passes it and redacts what it
    # finds no verdict for; the worker must leap ahead, not judge those lines again.
    import time
    real_verdicts = redactworker._verdicts
    def slow(redactor, values):
        time.sleep(0.01 * len(values))
        return real_verdicts(redactor, values)
    redactworker._verdicts = slow
elif mode == "half":
    cut = sys.argv[4]  # the worker judges a copy holding the first half of the lines
    real_judge = redactworker._judge
    redactworker._judge = lambda p, *rest: real_judge(cut, *rest)
elif mode == "fails":
    real_build = sequence.build
    def build(store, items, *a, **kw):
        for n, _ in enumerate(items):
            if n == 5:
                raise RuntimeError("the disk is full")
    sequence.build = build
repo = Repository.discover(repo_dir)
out = {}
try:
    res = porcelain.commit(repo, {"HOME": repo_dir}, repo_dir, file=path)
    out["notes"] = res.notes
except RuntimeError as exc:
    out["error"] = str(exc)
screen, pid = (started + [None, None])[:2]
out["used"] = screen.used if screen is not None else None
out["forked"] = pid is not None or "waited" in started
if pid is not None:
    try:
        os.waitpid(pid, os.WNOHANG)
        out["reaped"] = False
    except ChildProcessError:
        out["reaped"] = True
print(json.dumps(out))
"""


SID = "4d427a60-776a-4238-b86b-00e1c8eb4d72"
TEXTS = [
    "Our deploy is failing; please look at the config and the logs.",
    "[default]\naws_access_key_id = AKIAER4UISCXD5M2LJG2\nregion = eu-west-1\n",
    "export GITHUB_TOKEN=ghp_R7d2kQm9XvLp4TzW8nYb3HcJ6sFa1Ue5Gi0o\n",
    "\n".join(f"{i:5d}\tdef handler_{i}(request):  # clean code, read again and again" for i in range(400)),
    "curl -H 'Authorization: Bearer sk_live_51HxYzQpLmNoPqRsTuVwXyZa0123456789abcdEFGH' https://api.acme.dev",
]


def _session(tmp_path: Path) -> tuple[str, int]:
    """One conversation (one view: the commit asks for every line in order) with
    secrets among many clean records, and lines of every kind the worker must leave
    to the commit: blank, not JSON, JSON that is not stored as parsed (its bytes
    differ from the rendering), a lone surrogate (the standard parser's), an integer
    msgpack cannot carry beside a secret."""
    odd = [
        b"\n",
        b"this is not JSON {\n",
        b'{"type": "note",  "text": "spaced out", "n": 1.0}\n',
        b'{"type":"note","text":"lone \\ud800 surrogate"}\n',
        b'{"type":"note","big":' + str(2**70).encode() + b',"text":"AKIAER4UISCXD5M2LJG2"}\n',
        b'{"type":"note","big":' + str(2**70).encode() + b',"text":"no secret"}\n',
        b'{"type": "note", "aws": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}\n',
    ]
    lines: list[bytes] = []
    parent = None
    for i in range(400):
        uid = f"00000000-0000-4000-8000-{i:012d}"
        role = "user" if i % 2 == 0 else "assistant"
        rec = {"parentUuid": parent, "isSidechain": False, "type": role, "uuid": uid, "sessionId": SID,
               "cwd": "/home/dev/acme", "timestamp": f"2026-09-21T14:{i // 60 % 60:02d}:{i % 60:02d}.500Z",
               "message": {"role": role, "content": TEXTS[i % len(TEXTS)] + f" ({i})"}}
        lines.append(jsonl.dumps(rec) + b"\n")
        parent = uid
        if i % 97 == 50:
            lines += odd
    path = tmp_path / f"{SID}.jsonl"
    path.write_bytes(b"".join(lines))
    assert len(ClaudeAdapter().read(str(path)).views) == 1
    return str(path), len(lines)


def _repo(tmp_path: Path, name: str, key_from: str | None = None) -> str:
    repo = tmp_path / name
    repo.mkdir()
    git("init", "-q", str(repo))
    subprocess.run([sys.executable, "-m", "opalgit", "init"], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": ROOT})
    if key_from is not None:  # the same redaction key: placeholders compare equal
        vault = repo / ".git" / "opal" / "vault"
        vault.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copy2(key_from, vault / "secrets.jsonl")  # keeps its private mode
    return str(repo)


def _commit(repo: str, path: str, mode: str, *extra: str) -> dict:
    p = subprocess.run([sys.executable, "-c", SCRIPT, repo, path, mode, *extra], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": ROOT}, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def _judgeable(path: str, last: int) -> int:
    """How many of the first ``last`` records the worker can speak for: those stored as
    their parsed line, less the one with a secret beside an integer msgpack cannot
    carry (the worker cannot send its redaction)."""
    n = 0
    for rec in ClaudeAdapter().read(path).iter_records():
        if rec.line <= last and rec.turn.has_record:
            n += not (isinstance(rec.turn.record, dict) and "big" in rec.turn.record
                      and "AKIA" in rec.turn.record.get("text", ""))
    return n


def _tree(repo: str) -> str:
    return git("--git-dir", os.path.join(repo, ".git"), "rev-parse", "refs/opal/heads/main^{tree}").stdout.strip()


def _vault(repo: str) -> set[tuple[str, str]]:
    """(placeholder, secret) of every vault entry (not when it was written)."""
    lines = (Path(repo) / ".git/opal/vault/secrets.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    return {(e["p"], e["s"]) for e in entries if "p" in e}


@pytest.fixture
def base(tmp_path):
    """The session, and a commit of it made without a worker (the reference)."""
    path, n = _session(tmp_path)
    ref = _repo(tmp_path, "reference")
    # Create the key first, so that every other repository can share it.
    from opalgit.porcelain import secrets as redaction
    from opalgit.store.repo import Repository

    redaction.vault(Repository.discover(ref)).key()
    key = tmp_path / "key-only-vault.jsonl"
    shutil.copy2(Path(ref) / ".git/opal/vault/secrets.jsonl", key)
    out = _commit(ref, path, "off")
    assert not out["forked"]
    assert any("replaced by placeholders" in note for note in out["notes"]) and len(_vault(ref)) >= 3
    return tmp_path, path, n, ref, out["notes"], str(key)


def test_verdicts_make_the_same_commit(base):
    tmp_path, path, n, ref, notes, key = base
    repo = _repo(tmp_path, "worker", key_from=key)
    out = _commit(repo, path, "on")
    assert out["forked"]
    assert out["used"] == _judgeable(path, n)
    assert _tree(repo) == _tree(ref)
    assert _vault(repo) == _vault(ref)
    assert out["notes"] == notes


def test_a_worker_that_dies_at_once_changes_nothing(base):
    tmp_path, path, n, ref, _, key = base
    repo = _repo(tmp_path, "dies", key_from=key)
    out = _commit(repo, path, "dies")
    assert out["forked"] and out["reaped"] and out["used"] == 0
    assert _tree(repo) == _tree(ref) and _vault(repo) == _vault(ref)


def test_a_worker_that_judged_half_the_file(base):
    tmp_path, path, n, ref, _, key = base
    half = tmp_path / "half.jsonl"
    data = Path(path).read_bytes().splitlines(keepends=True)
    half.write_bytes(b"".join(data[: n // 2]))
    repo = _repo(tmp_path, "half", key_from=key)
    out = _commit(repo, path, "half", str(half))
    assert out["forked"] and 0 < out["used"] == _judgeable(path, n // 2) < _judgeable(path, n)
    assert _tree(repo) == _tree(ref) and _vault(repo) == _vault(ref)


def test_a_worker_the_commit_overtakes(base):
    # Whichever process is ahead, and however often the worker leaps past the commit,
    # the commit stores the same objects and vault entries.
    tmp_path, path, n, ref, notes, key = base
    repo = _repo(tmp_path, "behind", key_from=key)
    out = _commit(repo, path, "behind")
    assert out["forked"] and out["used"] < _judgeable(path, n)
    assert _tree(repo) == _tree(ref) and _vault(repo) == _vault(ref)
    assert out["notes"] == notes


def test_the_worker_is_reaped_when_the_commit_fails(base):
    tmp_path, path, n, ref, _, key = base
    repo = _repo(tmp_path, "fails", key_from=key)
    out = _commit(repo, path, "fails")
    assert out["error"] == "the disk is full" and out["forked"] and out["reaped"]
    # Nothing was committed, and the lock is free: the next commit goes through.
    assert git("--git-dir", os.path.join(repo, ".git"), "for-each-ref", "refs/opal/heads").stdout == ""
    out = _commit(repo, path, "on")
    assert _tree(repo) == _tree(ref)


# ------------------------------------------------------------------ the verdicts themselves


def _frames(*items: tuple[int, int, bytes]) -> bytes:
    return b"".join(struct.pack("<QII", line, crc, len(body)) + body for line, crc, body in items)


def _screen(data: bytes) -> Screen:
    rfd, wfd = os.pipe()
    screen = Screen(None, rfd)
    # Written in pieces that split frames: the reader must put them together.
    for i in range(0, len(data), 7):
        os.write(wfd, data[i : i + 7])
    os.close(wfd)
    assert screen._thread is not None
    screen._thread.join(timeout=30)
    return screen


def test_a_verdict_counts_only_for_the_same_bytes():
    line = b'{"type":"user","text":"hello"}'
    crc = zlib.crc32(line)
    redacted = msgpack.packb([{"text": "opal-secret:aws-access-key:0123456789ab"},
                              [["aws-access-key", "opal-secret:aws-access-key:0123456789ab", "AKIAER4UISCXD5M2LJG2"]]])
    screen = _screen(_frames((7, crc, b""), (8, 99, b""), (9, 5, redacted)))
    assert screen.verdict(7, crc) == (None, [])
    assert screen.verdict(7, crc) is None  # used once: a record asked again is redacted again
    assert screen.verdict(8, crc) is None  # another line's bytes than the adapter saw
    assert screen.verdict(8, None) is None  # a record that is not one whole line
    assert screen.verdict(1, crc) is None  # never judged
    value, found = screen.verdict(9, 5)
    assert value == {"text": "opal-secret:aws-access-key:0123456789ab"}
    assert [(f.kind, f.placeholder, f.secret) for f in found] == [
        ("aws-access-key", "opal-secret:aws-access-key:0123456789ab", "AKIAER4UISCXD5M2LJG2")]
    assert screen.used == 2
    screen.close()
    screen.close()  # idempotent


def test_small_reads_and_compressed_files_get_no_worker(tmp_path, monkeypatch):
    small = tmp_path / "s.jsonl"
    small.write_bytes(b'{"a":1}\n' * 10)
    assert not redactworker.worth_it(str(small), 0)
    assert redactworker.start(str(small), 0, 1, None).running is False  # redaction is off
    monkeypatch.setattr(redactworker, "MIN_BYTES", 16)
    assert redactworker.worth_it(str(small), 0)
    assert not redactworker.worth_it(str(small), 70)  # only what is left to read counts
    zst = tmp_path / "rollout.jsonl.zst"
    zst.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 64)
    assert not redactworker.worth_it(str(zst), 0)
    assert not redactworker.worth_it(str(tmp_path / "missing.jsonl"), 0)


def test_verdicts_waiting_are_bounded(monkeypatch):
    """A worker far ahead of the commit is paused (the reader stops reading, the pipe
    fills), and resumes as the commit uses verdicts: memory stays flat, nothing hangs."""
    monkeypatch.setattr(redactworker, "HOLD_BYTES", 1024)
    n = 20_000
    data = _frames(*((i, 7, b"") for i in range(1, n + 1)))  # 320 KB, more than a pipe holds
    rfd, wfd = os.pipe()

    def write() -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(wfd, view[: 1 << 16]) :]
        os.close(wfd)

    writer = threading.Thread(target=write, daemon=True)
    screen = Screen(None, rfd)
    writer.start()
    deadline = time.monotonic() + 60
    most = 0
    for line in range(1, n + 1):
        while screen.verdict(line, 7) is None:
            assert time.monotonic() < deadline, f"no verdict for line {line}: the reader is stuck"
            time.sleep(0.0005)
        most = max(most, screen._held)
    writer.join(timeout=30)
    assert screen.used == n and not writer.is_alive()
    assert most <= 1024 + (1 << 16) + 16  # the limit, plus one read of the pipe
    screen.close()


@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_verdicts_make_the_same_commit_for_every_jsonl_agent(tmp_path, agent):
    """Codex rollouts and Gemini CLI logs are JSON lines too: their records carry
    their line's CRC-32, so the worker speaks for them, with the same result."""
    from bench import generate

    st = generate.generate(agent, str(tmp_path / f"session-{agent}.jsonl"), size=400_000, seed=5)
    path = st.path
    # Secrets in every 25th record: appended to its first long string.
    lines = Path(path).read_bytes().splitlines()
    for i in range(0, len(lines), 25):
        value = json.loads(lines[i])
        if _add_secret(value, TEXTS[1 + i % 2]):
            lines[i] = jsonl.dumps(value)
    Path(path).write_bytes(b"\n".join(lines) + b"\n")
    ref = _repo(tmp_path, f"{agent}-reference")
    from opalgit.porcelain import secrets as redaction
    from opalgit.store.repo import Repository

    redaction.vault(Repository.discover(ref)).key()
    key = tmp_path / f"{agent}-key.jsonl"
    shutil.copy2(Path(ref) / ".git/opal/vault/secrets.jsonl", key)
    before = _commit(ref, path, "off")
    repo = _repo(tmp_path, f"{agent}-worker", key_from=str(key))
    out = _commit(repo, path, "on")
    assert out["forked"] and out["used"] > 0.9 * st.records
    assert _tree(repo) == _tree(ref)
    assert _vault(repo) == _vault(ref) and len(_vault(ref)) > 0
    assert out["notes"] == before["notes"]


def _add_secret(value, secret: str) -> bool:
    """Append ``secret`` to the first string of 20 characters or more in ``value``."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        if isinstance(v, str) and len(v) >= 20:
            value[k] = v + "\n" + secret
            return True
        if isinstance(v, (dict, list)) and _add_secret(v, secret):
            return True
    return False


def _judged(tmp_path: Path, lines: int, asked: int | None, monkeypatch) -> tuple[list[int], int]:
    """Run the worker's loop over ``lines`` clean JSON lines, the commit having asked
    about line ``asked`` (None: no shared page); the lines it judged, and its writes."""
    import mmap

    from opalgit.secrets import redact

    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"".join(b'{"type":"note","text":"line %d of plain prose"}\n' % i for i in range(1, lines + 1)))
    place = None
    if asked is not None:
        place = mmap.mmap(-1, mmap.PAGESIZE)
        place[:8] = struct.pack("<Q", asked)
    writes: list[bytes] = []
    monkeypatch.setattr(redactworker, "write_all", lambda fd, data: writes.append(bytes(data)))
    redactworker._judge(str(path), 0, 1, redact.Redactor(key=b"k" * 32), -1, place)
    data = b"".join(writes)
    judged = []
    pos = 0
    while pos < len(data):
        line, _crc, size = struct.unpack_from("<QII", data, pos)
        judged.append(line)
        pos += 16 + size
    return judged, len(writes)


def test_the_worker_skips_what_the_commit_has_passed(tmp_path, monkeypatch):
    # Ahead of the commit (it has asked about nothing yet): every line is judged.
    judged, _ = _judged(tmp_path, 100, 0, monkeypatch)
    assert judged == list(range(1, 101))
    # Behind it: the lines the commit has passed would be judged for nothing; the
    # worker leaps past the commit so that its verdicts come before they are asked for.
    judged, _ = _judged(tmp_path, 100, 40, monkeypatch)
    assert judged == list(range(40 + redactworker.LEAP, 101))
    # No page (it could not be mapped): the worker judges every line, as before.
    judged, _ = _judged(tmp_path, 100, None, monkeypatch)
    assert judged == list(range(1, 101))


def test_verdicts_leave_while_the_worker_runs(tmp_path, monkeypatch):
    # Verdicts of "nothing to redact" are 16 bytes: a write is due once they cover
    # _SEND_AFTER bytes of lines, not only when 16 KB of them wait (a thousand lines
    # the commit would by then have redacted itself).
    monkeypatch.setattr(redactworker, "_SEND_AFTER", 1024)
    judged, writes = _judged(tmp_path, 400, None, monkeypatch)
    assert judged == list(range(1, 401))
    assert len(judged) * 16 < redactworker._BATCH and 10 <= writes < 100


def test_verdicts_near_the_commit_leave_at_once(tmp_path, monkeypatch):
    # Within _NEAR lines of the commit, each verdict is written as soon as it is made;
    # further ahead they wait for _SEND_AFTER bytes of lines (here: more than the file).
    judged, writes = _judged(tmp_path, 400, 0, monkeypatch)
    assert judged == list(range(1, 401))
    assert writes == redactworker._NEAR + 1  # one each, then the rest at the end


def test_the_commit_tells_the_worker_where_it_is():
    import mmap

    rfd, wfd = os.pipe()
    place = mmap.mmap(-1, mmap.PAGESIZE)
    screen = Screen(None, rfd, place)
    for line in (3, 9, 5):  # a fork's earlier lines asked later do not move it back
        screen.verdict(line, 1)
    assert struct.unpack_from("<Q", place)[0] == 9
    os.close(wfd)
    screen.close()
    assert place.closed
