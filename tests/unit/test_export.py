"""opal export: budgets, dry runs, folders, never overwriting (the real-client proof is in tests/clients)."""

from __future__ import annotations

import json
import os

import pytest

from opalgit import porcelain
from opalgit.errors import ConflictError, UsageError
from opalgit.history import sequence
from opalgit.porcelain import export as exporting
from opalgit.store.repo import Repository
from tests.conftest import FIXTURES, opal
from tests.unit.test_porcelain import place

BIG = os.path.join(FIXTURES, "claude", "claude-code-viewer", "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")


@pytest.fixture
def repo(project, home):
    porcelain.init(str(project))
    r = Repository.discover(str(project))
    place(home, project, source=BIG)
    porcelain.commit(r, {"HOME": str(home)}, str(project))
    return r


def pairs(path: str) -> tuple[set, set]:
    calls, results = set(), set()
    for line in open(path):
        rec = json.loads(line)
        content = (rec.get("message") or {}).get("content")
        if isinstance(content, list):
            for b in content:
                if b.get("type") == "tool_use":
                    calls.add(b["id"])
                elif b.get("type") == "tool_result":
                    results.add(b["tool_use_id"])
    return calls, results


@pytest.mark.parametrize("target", ["claude", "codex", "gemini"])
def test_budget_stubs_big_outputs_then_old_turns_and_keeps_pairs(repo, project, tmp_path, target):
    env = {"HOME": str(tmp_path / "h"), "CODEX_HOME": str(tmp_path / "c")}
    full = exporting.export(repo, env, to=target, cwd=str(project), dry_run=True)
    budget = full.tokens_before // 3
    res = exporting.export(repo, env, to=target, cwd=str(project), budget=budget)
    assert res.tokens_after <= budget < res.tokens_before
    assert res.report.converted.get("budget:tool_output_stubbed", 0) > 0
    if target == "claude":
        calls, results = pairs(res.files[0])
        assert results == calls  # every call answered, no orphan result
    tight = exporting.export(repo, env, to=target, cwd=str(project), budget=2000)
    assert tight.report.dropped.get("budget:turn_left_out", 0) > 0


def test_dry_run_writes_nothing(repo, project, tmp_path):
    env = {"HOME": str(tmp_path / "h")}
    res = exporting.export(repo, env, to="claude", cwd=str(project), dry_run=True)
    assert res.dry_run and res.files and not os.path.exists(res.files[0])
    assert porcelain.tracked_session(repo, "main")[1] != res.session_id


def test_missing_folder_is_a_clear_error_and_files_are_never_overwritten(repo, project, tmp_path):
    env = {"HOME": str(tmp_path / "h")}
    with pytest.raises(UsageError) as err:
        exporting.export(repo, env, to="claude", cwd=str(tmp_path / "nope"))
    assert "no such folder" in str(err.value)
    first = exporting.export(repo, env, to="claude", cwd=str(project), session_id="11111111-1111-4111-8111-111111111111")
    with pytest.raises(ConflictError):
        exporting.export(repo, env, to="claude", cwd=str(project), session_id="11111111-1111-4111-8111-111111111111")
    assert os.path.getsize(first.files[0]) > 0
    # The branch now tracks the exported session, so the next commit records its growth.
    assert porcelain.tracked_session(repo, "main") == ("claude", first.session_id)


def test_cli_export_prints_the_resume_command_and_a_loss_report(repo, project, home):
    r = opal("export", "--to", "codex", "--cwd", str(project), cwd=project, env={"HOME": str(home), "CODEX_HOME": str(home / "codex")})
    assert r.returncode == 0, r.stderr
    assert "Resume it with:" in r.stdout and "codex resume" in r.stdout and "Loss report" in r.stdout
    j = json.loads(opal("export", "--to", "gemini", "--dry-run", "--json", cwd=project, env={"HOME": str(home)}).stdout)
    assert j["dry_run"] and j["resume"][:2] == ["gemini", "--resume"] and "dropped" in j["report"]


# ---------------------------------------------------------- resuming an export


def continue_export(path: str, session_id: str, turns: int = 4, seed: int = 5) -> None:
    """What the agent does on resume: append turns to the exported file."""
    from bench import generate as gen
    from bench.suite import _last_chain

    last, cwd = _last_chain(path)
    gen.continue_claude(path, turns=turns, seed=seed, session_id=session_id, parent_uuid=last, cwd=cwd or "/tmp")


def stored_ids(repo, rev: str) -> list[bytes]:
    st = porcelain.load_state(repo, porcelain.resolve(repo, rev).oid)
    return [si.item.id for si in sequence.iter_items(repo.store, st.root)]


def test_committing_a_resumed_export_stores_only_the_new_turns(repo, project, tmp_path):
    from opalgit.porcelain import fsck

    env = {"HOME": str(tmp_path / "h")}
    before = porcelain.load_state(repo, porcelain.resolve(repo, "HEAD").oid)
    out = exporting.export(repo, env, to="claude", cwd=str(project))
    continue_export(out.files[0], out.session_id)
    res = porcelain.commit(repo, env, str(project), file=out.files[0])
    assert any("continues the export" in n for n in res.notes), res.notes
    assert res.items - before.header.items == res.new_items
    assert 4 <= res.new_turns <= 6  # the agent's turns, and whatever the export itself added after the records
    # Every leaf of the exported state is kept but the last, which the new records extend:
    # the leaves after the kept ones hold that last leaf's records and the new ones, nothing
    # else. (How many leaves that takes depends on where content-defined boundaries fall,
    # and the records name the test's temporary folder, so the count is not asserted: a
    # bound on it failed in CI under a longer basetemp.)
    def leaves(rev):
        st = porcelain.load_state(repo, porcelain.resolve(repo, rev).oid)
        return sequence.leaves(repo.store, st.root)

    old, new = leaves("HEAD~1"), leaves("HEAD")
    kept = len(old) - 1
    assert [n.oid for n in new[:kept]] == [n.oid for n in old[:kept]]
    assert sum(n.items for n in new[kept:]) == old[-1].items + res.new_items
    # The stored records are the original ones, followed by the resumed session's.
    ids = stored_ids(repo, "HEAD")
    assert ids[: before.header.items] == stored_ids(repo, "HEAD~1")
    assert fsck.fsck(repo).ok
    # From then on the branch follows the new session as usual: incremental commits.
    continue_export(out.files[0], out.session_id, turns=2, seed=6)
    again = porcelain.commit(repo, env, str(project), file=out.files[0])
    assert again.incremental and again.new_turns == 2


def test_a_resumed_export_is_read_as_new_when_anything_moved(repo, project, tmp_path):
    env = {"HOME": str(tmp_path / "h")}
    n = porcelain.load_state(repo, porcelain.resolve(repo, "HEAD").oid).header.items
    # (a) The exported lines were changed.
    out = exporting.export(repo, env, to="claude", cwd=str(project))
    lines = open(out.files[0], "rb").read().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"type"', b'"type" ', 1)
    open(out.files[0], "wb").writelines(lines)
    continue_export(out.files[0], out.session_id)
    res = porcelain.commit(repo, env, str(project), file=out.files[0])
    assert not any("continues the export" in x for x in res.notes) and res.items - n > 4
    porcelain.undo(repo)
    # (b) The branch moved after the export (a commit of something else).
    out = exporting.export(repo, env, to="claude", cwd=str(project))
    porcelain.rewind(repo, 3)
    continue_export(out.files[0], out.session_id)
    res = porcelain.commit(repo, env, str(project), file=out.files[0])
    assert not any("continues the export" in x for x in res.notes)
    porcelain.undo(repo)
    porcelain.undo(repo)
    # (c) A damaged checkpoint is ignored, not trusted.
    out = exporting.export(repo, env, to="claude", cwd=str(project))
    folder = os.path.join(repo.opal_dir, "exports")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "w") as fh:
            fh.write("{not json")
    continue_export(out.files[0], out.session_id)
    res = porcelain.commit(repo, env, str(project), file=out.files[0])
    assert not any("continues the export" in x for x in res.notes)


@pytest.mark.parametrize("how", ["budget", "codex"])
def test_exports_that_change_the_records_leave_no_checkpoint(repo, project, tmp_path, how):
    import opalgit.porcelain.checkpoints as checkpoints

    env = {"HOME": str(tmp_path / "h"), "CODEX_HOME": str(tmp_path / "c")}
    if how == "budget":
        full = exporting.export(repo, env, to="claude", cwd=str(project), dry_run=True)
        out = exporting.export(repo, env, to="claude", cwd=str(project), budget=full.tokens_before // 3)
    else:
        out = exporting.export(repo, env, to="codex", cwd=str(project))
    # The file is known as one opal wrote (a rewound branch refuses it), but no
    # record of it stands for a stored one: a commit of it reads it as new.
    cp = checkpoints.load(repo.opal_dir, out.agent, out.files[0])
    assert cp is not None and cp.records == 0 and cp.state == out.commit


@pytest.mark.parametrize("fixture, kept", [
    ("agent-sessions/large.jsonl", True),  # legacy rollout, one session_meta
    ("agent-sessions/codex_050_legacy.jsonl", True),
    # Resumed six times: the later session_metas are written back as they are (only the
    # first is the thread's header), so lines and records stay one for one.
    ("agent-sessions/small.jsonl", True),
])
def test_a_resumed_codex_export_is_kept_the_same_way(project, home, tmp_path, fixture, kept):
    """Codex appends to the rollout it resumes; a same-agent export writes the new
    session_meta in place of the stored one, then one line per record."""
    import shutil

    from tests.conftest import FIXTURES as F

    project_s = str(project)
    porcelain.init(project_s)
    repo = Repository.discover(project_s)
    src = str(tmp_path / "rollout-src.jsonl")
    shutil.copy(os.path.join(F, "codex", fixture), src)
    env = {"HOME": str(home), "CODEX_HOME": str(tmp_path / "codex")}
    first = porcelain.commit(repo, env, project_s, file=src, agent="codex")
    out = exporting.export(repo, env, to="codex", cwd=project_s)
    lines = open(out.files[0], "rb").read().splitlines(keepends=True)
    last = json.loads(lines[-1])
    with open(out.files[0], "ab") as fh:  # what codex appends on resume: more items
        for n in range(2):
            fh.write(json.dumps({"timestamp": last.get("timestamp"), "type": "response_item", "payload": {
                "type": "message", "role": "user", "content": [{"type": "input_text", "text": f"next {n}"}]}}).encode() + b"\n")
    res = porcelain.commit(repo, env, project_s, file=out.files[0], agent="codex")
    continued = any("continues the export" in n for n in res.notes)
    assert continued is kept, (res.notes, out.report.converted)
    if kept:
        assert res.items == first.items + res.new_items and res.new_items >= 2
        assert stored_ids(repo, "HEAD")[: first.items] == stored_ids(repo, "HEAD~1")
