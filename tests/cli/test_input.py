"""Bad input a user can hand opal: each gets one clear error naming the path (and
the line), the exit code of its family, no traceback, no hang and nothing written;
and the odd but valid (integers of thousands of digits) commits and exports exactly."""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from opalgit import agents as adapters
from opalgit import fileio, jsonl
from opalgit.errors import InputError
from tests.conftest import git, opal

SID = "7c83c109-bd8e-4995-ab21-c69c5256ec0d"


def claude_lines(extra: dict) -> list[bytes]:
    """A small Claude Code session whose second prompt carries ``extra`` fields."""
    recs = [
        {"parentUuid": None, "isSidechain": False, "type": "user", "message": {"role": "user", "content": "hi"},
         "uuid": "11111111-1111-4111-8111-111111111111", "timestamp": "2026-01-02T03:04:05.000Z", "sessionId": SID},
        {"parentUuid": "11111111-1111-4111-8111-111111111111", "isSidechain": False, "type": "assistant",
         "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
                     "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
                     "stop_sequence": None},
         "uuid": "22222222-2222-4222-8222-222222222222", "timestamp": "2026-01-02T03:04:06.000Z", "sessionId": SID},
    ]
    lines = [json.dumps(r, separators=(",", ":")).encode() for r in recs]
    body = json.dumps({"parentUuid": "22222222-2222-4222-8222-222222222222", "isSidechain": False,
                       "type": "user", "message": {"role": "user", "content": "numbers"},
                       "uuid": "33333333-3333-4333-8333-333333333333", "timestamp": "2026-01-02T03:04:07.000Z",
                       "sessionId": SID, "PLACEHOLDER": 0}, separators=(",", ":")).encode()
    numbers = ",".join(f'"{k}":{v}' for k, v in extra.items()).encode()
    lines.append(body.replace(b'"PLACEHOLDER":0', numbers))
    return [line + b"\n" for line in lines]


@pytest.fixture
def ready(project, home):
    assert opal("init", cwd=project).returncode == 0
    return project


def refs(project) -> str:
    return git("for-each-ref", "refs/opal", cwd=str(project)).stdout


# ------------------------------------------------------------------ big integers

BIG = {"digits5000": "7" * 5000, "negative4301": "-" + "3" * 4301, "u64": str(2**64 - 1), "past64": str(2**64),
       "thirty": "123456789012345678901234567890", "neg65": str(-(2**64) - 5)}


def test_an_integer_of_thousands_of_digits_commits_and_exports_byte_identically(ready, home, tmp_path):
    src = tmp_path / "big.jsonl"
    lines = claude_lines(BIG)
    src.write_bytes(b"".join(lines))
    r = opal("commit", "--file", str(src), "--agent", "claude", cwd=ready)
    assert r.returncode == 0, r.stderr
    r = opal("export", "--to", "claude", "--json", cwd=ready)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    written = open(out["files"][0], "rb").read().splitlines(keepends=True)
    new_sid = out["session_id"].encode()
    # The export gives the session a new id; every other byte is the source's.
    assert written[: len(lines)] == [line.replace(SID.encode(), new_sid) for line in lines]
    assert b'"digits5000":' + b"7" * 5000 + b"," in written[2]


def test_big_integers_read_exactly_from_a_kept_line():
    line = claude_lines(BIG)[2].rstrip(b"\n")
    value = jsonl.parse(line)
    assert value["digits5000"] == jsonl.BigInteger("7" * 5000)
    assert not jsonl.exact(value, line)  # kept as its bytes, never as a record of strings
    kept = jsonl.parse_kept(line)
    assert kept["past64"] == 2**64 and kept["thirty"] == 123456789012345678901234567890
    assert jsonl.dumps(kept) == line
    assert not jsonl.exact(kept, line)  # msgpack carries 64 bits at most


def test_the_record_codec_carries_integers_of_any_size():
    from opalgit import codec

    value = {"a": 2**64, "b": -(2**200), "c": [jsonl.BigInteger("-" + "9" * 5000)], "d": 2**63 - 1, "e": True}
    assert codec.unpack_ordered(codec.pack_ordered(value)) == value
    packed = codec.pack_canonical("turn", {"agent": "x", "rec": codec.pack_ordered(value)})
    assert codec.unpack_canonical(packed, "turn")["rec"] == codec.pack_ordered(value)


def test_a_gemini_document_with_huge_integers_commits_and_exports_them(ready, home, tmp_path):
    doc = {"sessionId": "0199a1b2-0000-7000-8000-000000000001", "projectHash": "h",
           "startTime": "2026-01-01T00:00:00.000Z", "lastUpdated": "2026-01-01T00:00:00.000Z",
           "messages": [{"id": "m1", "timestamp": "2026-01-01T00:00:01.000Z", "type": "user", "content": "hi",
                         "n": 0}]}
    text = json.dumps(doc, indent=2).replace('"n": 0', f'"n": {"7" * 5000}, "m": {2**70}')
    src = tmp_path / "session-2026-01-01T00-00-0199a1b2.json"
    src.write_text(text)
    r = opal("commit", "--file", str(src), "--agent", "gemini", cwd=ready)
    assert r.returncode == 0, r.stderr
    r = opal("export", "--to", "gemini", "--json", cwd=ready)
    assert r.returncode == 0, r.stderr
    written = open(json.loads(r.stdout)["files"][0], "rb").read()
    assert b'"n":' + b"7" * 5000 + b',"m":' + str(2**70).encode() in written


# ------------------------------------------------------------------ paths that are not files


def special_paths(tmp_path) -> dict[str, str]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    a, b = tmp_path / "loop-a", tmp_path / "loop-b"
    os.symlink(b, a)
    os.symlink(a, b)
    dangling = tmp_path / "dangling.jsonl"
    os.symlink(tmp_path / "nowhere.jsonl", dangling)
    zero = tmp_path / "zero.jsonl"
    os.symlink("/dev/zero", zero)
    return {"/dev/zero": "/dev/zero", "/dev/null": "/dev/null", "fifo": str(fifo), "loop": str(a),
            "dangling": str(dangling), "link to /dev/zero": str(zero)}


EXPECTED = {"/dev/zero": "a device", "/dev/null": "a device", "fifo": "a named pipe (FIFO)",
            "loop": "a symbolic link that loops", "dangling": "which does not exist",
            "link to /dev/zero": "a device"}


def test_a_device_a_fifo_or_a_bad_link_is_named_for_what_it_is(ready, tmp_path):
    before = refs(ready)
    for name, path in special_paths(tmp_path).items():
        for extra in ([], ["--agent", "claude"], ["--agent", "codex"], ["--agent", "gemini"]):
            # opal() has a timeout: a read that blocks on the FIFO or never ends on /dev/zero fails it.
            r = opal("commit", "--file", path, *extra, cwd=ready)
            assert r.returncode == 5, (name, extra, r.stderr)
            first = r.stderr.splitlines()[0]
            assert first.startswith(f"opal: error: {path}: ") and EXPECTED[name] in first, (name, first)
            assert "no such file" not in r.stderr and "Traceback" not in r.stderr
            assert "hint:" in r.stderr
    assert refs(ready) == before


@pytest.mark.parametrize("agent", sorted(adapters.all_adapters()))
def test_every_adapter_refuses_what_is_not_a_regular_file(tmp_path, agent):
    ad = adapters.get(agent)
    for name, path in special_paths(tmp_path).items():
        with pytest.raises(InputError, match=EXPECTED[name].replace("(", r"\(").replace(")", r"\)")) as exc:
            ad.read(path)
        assert str(exc.value).startswith(path)
    with pytest.raises(InputError, match="no such file"):
        ad.read(str(tmp_path / "missing.jsonl"))


def test_a_config_or_rules_file_that_is_a_fifo_is_an_error_not_a_hang(ready, tmp_path):
    opal_dir = ready / ".git" / "opal"
    os.mkfifo(opal_dir / "secrets.toml")
    src = tmp_path / "s.jsonl"
    src.write_bytes(b"".join(claude_lines({"n": 1})))
    r = opal("commit", "--file", str(src), "--agent", "claude", cwd=ready)
    assert r.returncode == 5 and "secrets.toml: this is a named pipe (FIFO)" in r.stderr, r.stderr
    os.unlink(opal_dir / "secrets.toml")
    os.rename(opal_dir / "config", opal_dir / "config.real")
    os.mkfifo(opal_dir / "config")
    r = opal("status", cwd=ready)
    assert r.returncode == 5 and "config: this is a named pipe (FIFO)" in r.stderr, r.stderr


# ------------------------------------------------------------------ files of the wrong kind


def wrong_files(tmp_path) -> dict[str, tuple[bytes, str]]:
    zpath = tmp_path / "made.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("session.jsonl", b"".join(claude_lines({"n": 1})))
    text = b"".join(claude_lines({"n": 1})).decode()
    return {
        "image.png": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(200), "a PNG image"),
        "session.zip": (zpath.read_bytes(), "a zip archive"),
        "utf16.jsonl": (text.encode("utf-16"), "UTF-16 text"),
        "utf16be.jsonl": (text.encode("utf-16-be"), "UTF-16 text"),
        "junk.jsonl": (b"\x01\x02\x00\x00garbage" + bytes(range(256)), "a binary file"),
        "photo.jpg": (b"\xff\xd8\xff\xe0\x00\x10JFIF" + os.urandom(100), "a JPEG image"),
    }


def test_an_image_an_archive_or_utf16_says_what_it_is(ready, tmp_path):
    before = refs(ready)
    for name, (data, what) in wrong_files(tmp_path).items():
        path = tmp_path / name
        path.write_bytes(data)
        for extra in ([], ["--agent", "claude"], ["--agent", "codex"], ["--agent", "gemini"]):
            r = opal("commit", "--file", str(path), *extra, cwd=ready)
            assert r.returncode == 5, (name, extra, r.stderr)
            first, hint = r.stderr.splitlines()[:2]
            assert first == f"opal: error: {path}:1: this is {what}" + first.split(what, 1)[1], first
            assert hint.startswith("hint: ") and "Traceback" not in r.stderr
    assert refs(ready) == before


def test_a_folder_given_as_the_session_file(ready, tmp_path):
    r = opal("commit", "--file", str(tmp_path), cwd=ready)
    assert r.returncode == 2 and str(tmp_path) in r.stderr and "is a directory" in r.stderr
    for agent in sorted(adapters.all_adapters()):
        with pytest.raises(InputError, match="folder"):
            adapters.get(agent).read(str(tmp_path))


# An opencode session is one JSON document (`opencode export`), not lines: it has no line to refuse.
@pytest.mark.parametrize("agent", sorted(set(adapters.all_adapters()) - {"opencode"}))
def test_a_line_longer_than_any_agent_writes_is_refused_not_read_whole(tmp_path, monkeypatch, agent):
    monkeypatch.setattr(jsonl, "MAX_LINE", 1 << 20)
    path = tmp_path / "huge.jsonl"
    first = claude_lines({"n": 1})[0] if agent == "claude" else b'{"sessionId":"s","projectHash":"h"}\n'
    if agent == "codex":
        first = (b'{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"x",'
                 b'"cwd":"/p","originator":"codex_cli_rs","cli_version":"0.1"}}\n')
    if agent == "pi":
        first = b'{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'
    path.write_bytes(first + b'{"x":"' + b"a" * (3 << 20) + b'"}\n')
    with pytest.raises(InputError) as exc:
        adapters.get(agent).read(str(path))
    assert str(exc.value).startswith(f"{path}:2: a line longer than 1 MiB")


def test_open_input_never_blocks_and_reads_a_link_to_a_file(tmp_path):
    real = tmp_path / "real.jsonl"
    real.write_bytes(b"{}\n")
    link = tmp_path / "link.jsonl"
    os.symlink(real, link)
    with fileio.open_input(str(link)) as fh:
        assert fh.read() == b"{}\n"
    with pytest.raises(FileNotFoundError):
        fileio.open_input(str(tmp_path / "missing"))
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2000)
    with pytest.raises(InputError, match="larger than"):
        fileio.read_input(str(big), what="config file", limit=1000)


def test_a_folder_option_names_what_the_path_is(ready, tmp_path):
    from tests.unit.test_porcelain import place

    place(ready.parent / "home", ready, lines=5)
    assert opal("commit", cwd=ready).returncode == 0
    paths = special_paths(tmp_path)
    paths["a file"] = str(tmp_path / "plain.txt")
    (tmp_path / "plain.txt").write_text("x\n")
    said = dict(EXPECTED, **{"a file": "a file", "fifo": "a named pipe (FIFO), not a folder",
                             "/dev/zero": "a device", "/dev/null": "a device"})
    for name, path in paths.items():
        for argv, code in ((["-C", path, "status"], 2), (["export", "--to", "claude", "--cwd", path, "--dry-run"], 2),
                           (["demo", "--keep", path], 2)):
            r = opal(*argv, cwd=ready)
            assert r.returncode == code, (argv, r.stderr)
            assert path in r.stderr and said[name] in r.stderr and "Traceback" not in r.stderr, (argv, r.stderr)


def test_a_gemini_document_with_a_lone_surrogate_commits(ready, tmp_path):
    # Found by the fuzz test: a record of a whole document holding "\ud800" could not
    # be packed (UnicodeEncodeError, exit 70).
    doc = ('{"sessionId":"0199a1b2-0000-7000-8000-000000000001","projectHash":"h","startTime":"2026-01-01T00:00:00Z",'
           '"messages":[{"id":"m1","timestamp":"2026-01-01T00:00:01.000Z","type":"user","content":"hi \\ud800"}]}')
    src = tmp_path / "session-2026-01-01T00-00-0199a1b2.json"
    src.write_text(doc)
    r = opal("commit", "--file", str(src), "--agent", "gemini", cwd=ready)
    assert r.returncode == 0, r.stderr
