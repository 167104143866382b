"""A Codex copy of a paginated (0.169) session: written in legacy mode with the UI events
a legacy rollout shows, found by ``codex exec resume --last`` in its folder, and
resumed with the whole model history."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from opalgit.agents import get
from opalgit.agents.base import ExportRequest, ExportTurn
from tests.conftest import FIXTURES

from . import harness
from .history import history_of

pytestmark = pytest.mark.clients


def test_exported_paginated_session_is_found_by_last_and_carries_ui_events(tmp_path):
    harness.require_client("codex")
    ad = get("codex")
    folder = os.path.join(FIXTURES, "codex", "generated")
    source = ad.read(os.path.join(folder, sorted(os.listdir(folder))[0]))
    root = harness.make_root(tmp_path)
    sid = "019b0000-1111-7222-8333-444455556666"
    req = ExportRequest(
        turns=[ExportTurn(r.turn, r.normal) for r in source.records],
        session=source.session,
        cwd=str(root.project),
        session_id=sid,
        env={"CODEX_HOME": str(root.codex_home), "HOME": str(root.home)},
        now_ms=int(time.time() * 1000),
    )
    out = ad.export(req)
    assert out.report.converted.get("ui_event:added", 0) >= 2
    body = out.files[0][1]
    assert body.count(b'"type":"user_message"') == 2 and b'"ordinal"' not in body
    for path, data in out.files:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
    with harness.mock_for("codex", [harness.Reply("ok")]) as srv:
        harness.write_codex_config(root, srv.port)
        proc = subprocess.run(
            [str(harness.client_bin("codex")), "exec", "--skip-git-repo-check", "--json", "resume", "--last", "continue"],
            cwd=root.project, env=harness.client_env("codex", root, srv.port), capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f'"thread_id":"{sid}"' in proc.stdout
        model = [r for r in srv.requests if r.kind == "model"]
        items = history_of(model[0].body, "codex")
        assert [i[0] for i in items].count("user") == 3 and items[-1][:2] == ("user", "continue")
