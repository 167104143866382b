"""``opal fsck`` checks the ``side`` tree of every state commit (docs/format.md, State
commits): a Claude session's subagents folder committed for real, then state commits
forged with the real ``git`` binary whose side tree holds what an export must never write
(a ``..`` entry, a symlink, a missing blob)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from opalgit.porcelain.fsck import unsafe_side_name
from tests.conftest import FIXTURES, opal

SESSION = os.path.join(FIXTURES, "claude", "agent-sessions", "subagent", "0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl")


def git(*args: str, cwd, input: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=str(cwd), input=input, capture_output=True, check=True).stdout


def _entry(mode: str, name: str, oid_hex: str) -> bytes:
    return mode.encode() + b" " + name.encode() + b"\0" + bytes.fromhex(oid_hex)


@pytest.fixture
def committed(tmp_path, project):
    src = tmp_path / "sess"
    src.mkdir()
    shutil.copy(SESSION, src)
    shutil.copytree(SESSION[: -len(".jsonl")], src / os.path.basename(SESSION)[: -len(".jsonl")])
    assert opal("init", cwd=project).returncode == 0
    proc = opal("commit", "--file", str(src / os.path.basename(SESSION)), "--agent", "claude", "-m", "s", cwd=project)
    assert proc.returncode == 0, proc.stderr
    return project


def _forge(project, side_entries: list[bytes]) -> None:
    """Point the current branch at a child of HEAD's state whose side tree is ``side_entries``."""
    ref = "refs/opal/heads/main"
    head = git("rev-parse", ref, cwd=project).decode().strip()
    tree = git("cat-file", "-p", f"{head}^{{tree}}", cwd=project).decode().splitlines()
    assert any(line.endswith("\tside") for line in tree), "the committed state has a side tree"
    side = git("hash-object", "-t", "tree", "--literally", "-w", "--stdin", cwd=project,
               input=b"".join(side_entries)).decode().strip()
    rows = [line for line in tree if not line.endswith("\tside")] + [f"040000 tree {side}\tside"]
    new_tree = git("mktree", cwd=project, input=("\n".join(rows) + "\n").encode()).decode().strip()
    commit = git("commit-tree", new_tree, "-p", head, "-m", "forged", cwd=project).decode().strip()
    git("update-ref", ref, commit, cwd=project)


def _fsck(project) -> tuple[int, list[str]]:
    proc = opal("fsck", "--json", cwd=project)
    return proc.returncode, json.loads(proc.stdout)["problems"]


def test_a_committed_side_tree_is_clean(committed):
    rc, problems = _fsck(committed)
    assert (rc, problems) == (0, [])


@pytest.mark.parametrize("entries, says", [
    ([("100644", "..", "blob")], "leaves the session's folder"),
    ([("120000", "agent-x.jsonl", "blob")], "is a symlink"),
    ([("160000", "agent-x.jsonl", "blob")], "is a submodule link"),
    ([("100644", "agent-x.jsonl", "missing")], "missing"),
    ([("100644", "a\\b.jsonl", "blob")], "backslash"),
    ([("40000", "subagents", "subtree")], "leaves the session's folder"),  # a '.' one folder down
])
def test_a_corrupt_side_tree_is_named(committed, entries, says):
    project = committed
    blob = git("hash-object", "-w", "--stdin", cwd=project, input=b"{}\n").decode().strip()
    inner = git("hash-object", "-t", "tree", "--literally", "-w", "--stdin", cwd=project,
                input=_entry("100644", ".", blob)).decode().strip()
    ids = {"blob": blob, "missing": "ab" * 20, "subtree": inner}
    _forge(project, [_entry(mode, name, ids[what]) for mode, name, what in entries])
    rc, problems = _fsck(project)
    assert rc != 0 and any(says in p and "side" in p for p in problems), problems


def test_side_names_an_export_writes():
    assert unsafe_side_name("agent-a0ad4f44468bdf20d.meta.json") is None
    assert unsafe_side_name("tool-results") is None
    for bad in ("", ".", "..", "x\\..", "\udcff"):
        assert unsafe_side_name(bad), bad


def test_a_symlink_in_the_side_folder_is_said_and_not_followed(tmp_path, project):
    """A link in ``<session>/`` is neither followed (its target may be any file of the
    machine) nor skipped in silence."""
    src = tmp_path / "sess"
    src.mkdir()
    shutil.copy(SESSION, src)
    folder = src / os.path.basename(SESSION)[: -len(".jsonl")]
    shutil.copytree(SESSION[: -len(".jsonl")], folder)
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("not the session's\n")
    os.symlink(secret, folder / "subagents" / "agent-link.jsonl")
    os.symlink(tmp_path, folder / "linked-dir")
    assert opal("init", cwd=project).returncode == 0
    proc = opal("commit", "--file", str(src / os.path.basename(SESSION)), "--agent", "claude", "-m", "s", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "agent-link.jsonl: a symbolic link; not stored" in proc.stderr, proc.stderr
    assert "linked-dir: a symbolic link; not followed" in proc.stderr, proc.stderr
    tree = git("ls-tree", "-r", "--name-only", "refs/opal/heads/main", cwd=project).decode()
    assert "side/subagents/agent-a0ad4f44468bdf20d.jsonl" in tree and "agent-link" not in tree
