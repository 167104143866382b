"""``opal status`` speaks in turns and names the next command; a stopped merge's conflicts
are listed by status and by merge with one renderer (opalgit/porcelain/status.py, opalgit/cli/commands/merge.py)."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import opal
from tests.unit.test_porcelain import grow, place


@pytest.fixture
def ready(project, home):
    assert opal("init", cwd=project).returncode == 0
    return project, place(home, project, lines=30)


def status(project) -> tuple[str, dict]:
    text = opal("status", cwd=project)
    data = opal("status", "--json", cwd=project)
    assert text.returncode == data.returncode == 0, text.stderr + data.stderr
    return text.stdout, json.loads(data.stdout)


def test_new_turns_are_counted_as_the_next_commit_counts_them(ready):
    project, path = ready
    text, data = status(project)
    assert "On branch main: no commits yet" in text
    first = data["sessions"][0]
    assert f"has {first['uncommitted_turns']} turns, not recorded on this branch: opal commit" in text
    assert data["next"] == ["opal commit"] and text.rstrip().endswith("Next: opal commit")
    made = json.loads(opal("commit", "--json", cwd=project).stdout)
    assert made["new_turns"] == first["uncommitted_turns"]

    text, data = status(project)
    assert f"On branch main: {made['turns']} turns (head {made['id'][:7]})" in text
    assert "is recorded up to its last turn" in text and text.rstrip().endswith("Nothing to commit.")
    assert data["next"] == [] and data["sessions"][0]["uncommitted_turns"] == 0

    grow(path, start=30)
    text, data = status(project)
    new = data["sessions"][0]["uncommitted_turns"]
    sid = data["sessions"][0]["id"][:8]
    assert new > 1 and f"The Claude Code session {sid} has {new} new turns: opal commit" in text
    again = json.loads(opal("commit", "--json", cwd=project).stdout)
    assert again["new_turns"] == new and again["incremental"]


def test_a_line_still_being_written_is_not_a_turn(ready):
    project, path = ready
    assert opal("commit", cwd=project).returncode == 0
    with open(path, "ab") as fh:
        fh.write(b'{"type": "user", "message": {"role": "user", "content": "half')
    text, data = status(project)
    assert "has a line the agent is still writing (nothing to commit yet)" in text
    assert data["next"] == [] and data["sessions"][0]["uncommitted_turns"] == 0


def test_another_session_is_named_with_the_command_that_records_it(ready, home):
    project, _ = ready
    assert opal("commit", cwd=project).returncode == 0
    other = place(home, project, lines=12, name="0f0f0f0f-1111-2222-3333-444444444444.jsonl")
    os.utime(other, (1, 1))  # older: the tracked session stays the one 'opal commit' records
    text, data = status(project)
    sessions = {s["id"]: s for s in data["sessions"]}
    assert sessions["0f0f0f0f-1111-2222-3333-444444444444"]["uncommitted_turns"] > 0
    assert ("not recorded on this branch: opal commit --session 0f0f0f0f-1111-2222-3333-444444444444") in text
    assert data["next"] == ["opal commit --session 0f0f0f0f-1111-2222-3333-444444444444"]


def test_a_rewound_branch_says_to_export(ready):
    project, _ = ready
    assert opal("commit", cwd=project).returncode == 0
    assert opal("rewind", "2", cwd=project).returncode == 0
    text, data = status(project)
    assert "This state was rewound" in text and data["next"] == ["opal export --to claude"]
    assert text.rstrip().endswith("Next: opal export --to claude")


def _conflict(project):
    assert opal("commit", cwd=project).returncode == 0
    for name, span, summary in (("c1", "HEAD:3..HEAD:4", "version one"), ("c2", "HEAD:3..HEAD:5", "version two")):
        assert opal("branch", name, "main", cwd=project).returncode == 0
        assert opal("switch", name, cwd=project).returncode == 0
        assert opal("squash", span, "-m", summary, cwd=project).returncode == 0, name
    return opal("merge", "c1", cwd=project)


def test_conflicts_are_listed_with_turn_numbers_and_text_by_status_and_merge_alike(ready):
    project, _ = ready
    merged = _conflict(project)
    assert merged.returncode == 1, merged.stderr
    assert merged.stdout.startswith("Merge of c1 into c2 stopped on 1 conflict:\n")
    block = merged.stdout.split("\n", 1)[1]
    text, data = status(project)
    assert block in text  # one renderer for both
    assert "Merging c1 into c2: stopped on 1 conflict" in text
    (conflict,) = data["merge"]["conflicts"]
    ours, theirs = conflict["ours"], conflict["theirs"]
    # Each side's first turn is its summary (the previews begin with opal's note).
    assert [t["turn"] for t in ours] == [3] and "squashed into this summary" in ours[0]["preview"]
    assert theirs[0]["turn"] == 3 and "squashed into this summary" in theirs[0]["preview"]
    assert conflict["base"][0]["turn"] == 3 and conflict["base"][0]["preview"]
    assert [t["turn"] for t in theirs] == list(range(3, 3 + len(theirs)))
    assert "    ours   (c2): turn 3\n" in block and f"    theirs (c1): turns 3-{theirs[-1]['turn']}\n" in block
    assert f"          3  user: {ours[0]['preview']}\n" in block
    assert data["next"][0] == "opal merge --continue --take 0=ours" and text.rstrip().endswith(
        "Next: opal merge --continue --take 0=ours")
    done = opal("merge", "--continue", "--take", "0=theirs", cwd=project)
    assert done.returncode == 0, done.stderr
    text, data = status(project)
    assert data["merge"] is None and "Merging" not in text



def test_turns_before_counts_what_iterating_counts(ready):
    """The conflict's turn numbers start from sequence.turns_before: check it at every index."""
    from opalgit import porcelain
    from opalgit.history import sequence
    from opalgit.store.repo import Repository

    project, path = ready
    grow(path, start=30)
    assert opal("commit", cwd=project).returncode == 0
    repo = Repository.discover(str(project))
    st = porcelain.load_state(repo, porcelain.resolve(repo, "HEAD").oid)
    flags = [si.item.is_turn for si in sequence.iter_items(repo.store, st.root)]
    assert len(sequence.leaves(repo.store, st.root)) > 1  # the walk goes down interior trees
    for index in range(len(flags) + 2):
        assert sequence.turns_before(repo.store, st.root, index) == sum(flags[:index]), index
