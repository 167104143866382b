"""Progress of long operations (opalgit/progress.py): on a terminal only, erased when done,
and output that is not a terminal byte for byte what it was.

The terminal is a real pseudo-terminal (pty). No test depends on the clock: a display
whose delay is 0 draws as soon as a task starts, and one whose delay is an hour never
draws in a test's time.
"""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys

import pytest

from opalgit import progress
from tests.conftest import FIXTURES, opal

BIG = os.path.join(FIXTURES, "claude", "claude-code-viewer", "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
FRAME = re.compile(rb"\r\x1b\[K")


def on_pty(*args: str, cwd, env: dict | None = None, stdout_too: bool = False) -> tuple[int, bytes, bytes]:
    """Run opal with stderr (and, with ``stdout_too``, stdout) on a pseudo-terminal."""
    master, slave = pty.openpty()
    full = {**os.environ, "TERM": "xterm", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "opalgit", *args], cwd=str(cwd), env=full,
                            stdin=subprocess.DEVNULL, stdout=slave if stdout_too else subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every holder of the terminal's other side has closed it
            break
        if not data:
            break
        chunks.append(data)
    out = b"" if stdout_too else proc.stdout.read()
    proc.wait(timeout=120)
    os.close(master)
    return proc.returncode, out, b"".join(chunks)


@pytest.fixture
def repo(project):
    assert opal("init", cwd=project).returncode == 0
    return project


# ------------------------------------------------------------------------------ on a terminal


def test_a_slow_commit_shows_progress_on_a_terminal_and_erases_it(repo):
    rc, out, err = on_pty("commit", "--file", BIG, cwd=repo, env={"OPAL_PROGRESS_DELAY": "0"})
    assert rc == 0, err
    assert out.startswith(b"[main ") and b"31 new turns" in out
    assert b"opal commit: storing records" in err and FRAME.search(err)
    assert err.endswith(b"\r\x1b[K")  # the line is gone when the command ends
    assert b"\x1b[3" not in err  # no colour, ever


def test_an_export_shows_the_records_it_reads(repo):
    assert opal("commit", "--file", BIG, cwd=repo).returncode == 0
    rc, out, err = on_pty("export", "--to", "codex", cwd=repo, env={"OPAL_PROGRESS_DELAY": "0"})
    assert rc == 0, err
    assert re.search(rb"opal export: reading records \d+/\d+ \(\d+%\)", err) and b"Exported " in out


def test_progress_is_erased_before_the_command_prints(repo):
    rc, _out, both = on_pty("commit", "--file", BIG, cwd=repo, env={"OPAL_PROGRESS_DELAY": "0"}, stdout_too=True)
    assert rc == 0, both
    at = both.index(b"[main ")
    assert both[:at].endswith(b"\r\x1b[K")  # erased first, not printed over the progress line
    assert b"opal commit" not in both[at:]


def test_quick_commands_and_json_and_dumb_terminals_show_none(repo):
    rc, _out, err = on_pty("commit", "--file", BIG, cwd=repo, env={"OPAL_PROGRESS_DELAY": "3600"})
    assert rc == 0 and err == b""  # under the delay: nothing at all
    for args, env in ((("fsck", "--json"), {}), (("fsck",), {"TERM": "dumb"}), (("fsck",), {"OPAL_PROGRESS": "off"})):
        rc, out, err = on_pty(*args, cwd=repo, env={"OPAL_PROGRESS_DELAY": "0", **env})
        assert rc == 0 and err == b"", (args, env, err)
    rc, out, err = on_pty("fsck", cwd=repo, env={"OPAL_PROGRESS_DELAY": "0"})
    assert rc == 0 and re.search(rb"opal fsck: checking refs \d+/\d+ \(\d+%\)", err)


def test_a_git_hook_never_draws(repo, home):
    """The post-commit hook's work may go on in the background after git has returned
    the terminal to the prompt: it must never draw there."""
    from tests.unit.test_porcelain import place

    place(home, repo, lines=30)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "code"], cwd=str(repo), check=True)
    rc, _out, err = on_pty("hook", "post-commit", cwd=repo, env={"OPAL_PROGRESS_DELAY": "0"})
    assert rc == 0 and not FRAME.search(err) and b"opal hook" not in err, err


def test_nothing_is_drawn_while_git_may_ask_for_a_password(repo, tmp_path):
    """push and fetch wait for git, which may prompt on the terminal (a password, a host
    key): a progress line redrawn meanwhile would erase the prompt. Nothing is drawn."""
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    subprocess.run(["git", "remote", "add", "origin", str(bare)], cwd=str(repo), check=True)
    assert opal("commit", "--file", BIG, cwd=repo).returncode == 0
    for args in (("push", "origin", "main"), ("fetch", "origin")):
        rc, _out, err = on_pty(*args, cwd=repo, env={"OPAL_PROGRESS_DELAY": "0"})
        assert rc == 0 and b"opal " not in err and not FRAME.search(err), (args, err)


# ------------------------------------------------------------------------------ not a terminal


def test_output_that_is_not_a_terminal_is_unchanged(repo, tmp_path):
    """With stderr a pipe nothing is drawn, whatever the delay: the bytes are those of a
    run with progress off (the path every command took before progress existed)."""
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    assert opal("init", cwd=other).returncode == 0

    def run(folder, env):
        outs = []
        for args in (("commit", "--file", BIG), ("log", "--oneline"), ("fsck",), ("rewind", "2"), ("undo",),
                     ("status",)):
            r = subprocess.run([sys.executable, "-m", "opalgit", *args], cwd=str(folder), env={**os.environ, **env},
                               capture_output=True, timeout=120)
            # Commit ids differ between the two repositories (times); nothing else may.
            outs.append((r.returncode, re.sub(rb"[0-9a-f]{7,40}", b"ID", r.stdout), re.sub(rb"[0-9a-f]{7,40}", b"ID", r.stderr)))
        return outs

    shown = run(repo, {"OPAL_PROGRESS_DELAY": "0", "TERM": "xterm"})
    plain = run(other, {"OPAL_PROGRESS": "off"})
    assert shown == plain
    for _rc, out, err in shown:
        assert b"\r" not in err and b"\x1b" not in err and b"\x1b" not in out


# ------------------------------------------------------------------------------ the display


def test_the_display_shows_the_innermost_task_and_nothing_before_the_delay():
    stream = io.StringIO()
    with progress.shown(stream, title="opal x", delay=0) as d:
        with progress.task("outer"):
            with progress.task("reading session", 4 << 20, "bytes") as t:
                t.advance(1 << 20)
                d.draw()
                assert stream.getvalue().endswith("opal x: reading session 1.0/4.0 MB (25%) " + d.line()[-1])
            d.draw()
            assert "outer" in stream.getvalue().rsplit("\r\x1b[K", 1)[1]
        assert stream.getvalue().endswith("\r\x1b[K")  # no task runs: no line
        assert list(progress.iterate([1, 2], "items", 2)) == [1, 2]
    assert stream.getvalue().endswith("\r\x1b[K")
    quiet = io.StringIO()
    with progress.shown(quiet, delay=3600) as d:
        with progress.task("work", 10) as t:
            t.advance(5)
            d.draw()
    assert quiet.getvalue() == ""


def test_without_a_display_tasks_do_nothing():
    assert progress._display is None
    with progress.task("anything", 3) as t:
        t.advance(2)
    assert list(progress.iterate(iter("ab"), "letters")) == ["a", "b"]
    progress.erase()


def test_a_forked_process_does_not_draw():
    stream = io.StringIO()
    with progress.shown(stream, delay=0) as d:
        d._pid = -1  # as in a child forked after the display was made
        with progress.task("work") as t:
            t.advance()
        d.draw() if d.due() else None
        d.erase()
        d._pid = os.getpid()
    assert stream.getvalue() == ""
