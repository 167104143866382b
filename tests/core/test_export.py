"""opal export: budgets, dry runs, folders, never overwriting (the real-client proof is in tests/clients)."""

from __future__ import annotations

import json
import os

import pytest

from opalgit import exporting, porcelain
from opalgit.errors import ConflictError, UsageError
from opalgit.repo import Repository
from tests.conftest import FIXTURES, opal
from tests.core.test_porcelain import place

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
