"""``opal gc`` and ``opal secrets purge --literal`` (issue 19, Part B: clean-up).

Real repositories, the real git binary (git gc, git fsck, git cat-file), real bare
remotes over file://; the op-log times are read from the operations themselves, so
no test waits for a clock.
"""

from __future__ import annotations

import calendar
import json
import os
import shutil

import pytest

from opalgit import porcelain
from opalgit.errors import RevisionError, UsageError
from opalgit.history import oplog
from opalgit.porcelain import drop as cleanup
from opalgit.porcelain import gc
from opalgit.porcelain import secrets as redaction
from opalgit.porcelain.secrets import gate
from opalgit.store.refs import OPLOG_REF
from opalgit.store.repo import Repository
from opalgit.sync.push import push
from tests.conftest import git, opal
from tests.unit.test_porcelain import SESSION, grow, place
from tests.unit.test_secrets import every_object_text

# A secret no rule knows (no keyword, no known prefix, low entropy): only --literal finds it.
LITERAL = "Zebra-Lantern-4417"


@pytest.fixture
def repo(project, home):
    porcelain.init(str(project))
    return Repository.discover(str(project))


def env_of(home) -> dict:
    return dict(os.environ, HOME=str(home))


# ------------------------------------------------------------------ ages


def test_ages_are_read_as_git_reads_them():
    now = 1_800_000_000.0
    assert gc.parse_age("now", now) == now and gc.parse_age("all", now) == now
    assert gc.parse_age("never", now) is None and gc.parse_age("false", now) is None
    assert gc.parse_age("2.weeks.ago", now) == now - 14 * 86400
    assert gc.parse_age("30 days", now) == gc.parse_age("30.days", now) == now - 30 * 86400
    assert gc.parse_age("1 hour ago", now) == gc.parse_age("1.hour.ago", now) == now - 3600
    assert gc.parse_age("3.months.ago", now) == now - 90 * 86400
    assert gc.parse_age("2026-11-01", now) == calendar.timegm((2026, 11, 1, 0, 0, 0))
    assert gc.parse_age("2026-11-01 10:30", now) == calendar.timegm((2026, 11, 1, 10, 30, 0))
    for bad in ("soon", "2.fortnights.ago", "-3 days", "2026-13-45", ""):
        with pytest.raises(UsageError) as err:
            gc.parse_age(bad, now)
        assert "2.weeks.ago" in err.value.hint
    # What git is handed is opal's own spelling, never the text typed.
    assert gc.git_date(None, now) == "never" and gc.git_date(now, now) == "now"
    assert gc.git_date(now - 86400, now) == "2027-01-14 08:00:00 +0000"


def test_a_bad_age_changes_nothing(repo, project, home):
    place(home, project, lines=20)
    porcelain.commit(repo, env_of(home), str(project))
    before = repo.refs.get(OPLOG_REF)
    r = opal("gc", "--prune", "tomorrowish", cwd=project, env={"HOME": str(home)})
    assert r.returncode == 2 and "not an age: 'tomorrowish'" in r.stderr and "Traceback" not in r.stderr
    assert repo.refs.get(OPLOG_REF) == before


# ------------------------------------------------------------------ expiry


def _history(repo, project, home):
    """main committed twice; branch x with a state of its own, then deleted; then a rewind.

    Returns (the op that deleted x, x's state, the rewind op)."""
    env = env_of(home)
    path = place(home, project, lines=20)
    porcelain.commit(repo, env, str(project))
    porcelain.branch_create(repo, "x")
    porcelain.switch(repo, "x")
    grow(path, start=20, end=30)
    x_state = porcelain.commit(repo, env, str(project)).oid
    porcelain.switch(repo, "main")
    porcelain.branch_delete(repo, "x", force=True)
    deleted = next(oplog.log(repo))
    porcelain.rewind(repo, 2, None)
    rewind = next(oplog.log(repo))
    assert deleted.command == "branch" or "delete" in deleted.description, deleted
    assert rewind.command == "rewind"
    return deleted, x_state, rewind


def test_gc_expires_old_operations_and_git_gc_deletes_the_states_only_they_kept(repo, project, home):
    deleted, x_state, rewind = _history(repo, project, home)
    main_rewound = porcelain.branch_head(repo, "main")
    total = len(list(oplog.log(repo)))
    assert git("cat-file", "-e", x_state.hex(), cwd=str(project)).returncode == 0
    # Everything before the rewind is older than the cutoff: now is an hour after it.
    res = gc.gc(repo, "1.hour.ago", "now", now=rewind.time / 1000 + 3600)
    assert (res.expired, res.kept) == (total - 1, 1)
    assert res.after is not None and res.purge_barrier is None

    log = list(oplog.log(repo))
    assert [o.command for o in log] == ["gc", "rewind", "expired"]
    assert log[1].oid != rewind.oid  # kept, on the shortened chain
    # The deleted branch's own state was held by the expired operation only: gone.
    assert git("cat-file", "-e", x_state.hex(), cwd=str(project), check=False).returncode != 0
    assert git("fsck", "--strict", cwd=str(project)).returncode == 0
    r = opal("fsck", cwd=project, env={"HOME": str(home)})
    assert r.returncode == 0, r.stdout + r.stderr

    # Undo of an expired operation: refused, and the message says why.
    with pytest.raises(RevisionError) as err:
        porcelain.undo(repo, deleted.oid.hex()[:10])
    assert "expired by 'opal gc'" in err.value.message and "can no longer be undone" in err.value.message
    r = opal("undo", deleted.oid.hex()[:10], cwd=project, env={"HOME": str(home)})
    assert r.returncode != 0 and "expired by 'opal gc'" in r.stderr and "Traceback" not in r.stderr
    # gc itself is not undoable.
    with pytest.raises(UsageError):
        porcelain.undo(repo, log[0].oid.hex())
    # The kept operation answers to the id printed before gc, and undoes as before.
    undone = porcelain.undo(repo, rewind.oid.hex()[:12])
    assert porcelain.branch_head(repo, "main") == rewind.changes["refs/opal/heads/main"][0] != main_rewound
    assert undone.undoes == log[1].oid  # it names the operation by its current id
    porcelain.undo(repo, undone.oid.hex())  # and the undo is undoable (a redo)
    assert porcelain.branch_head(repo, "main") == main_rewound


def test_a_second_gc_keeps_what_the_first_one_renamed_and_expired(repo, project, home):
    deleted, _x, rewind = _history(repo, project, home)
    gc.gc(repo, "1.hour.ago", "now", now=rewind.time / 1000 + 3600)
    porcelain.rewind(repo, 1, None)
    later = next(oplog.log(repo))
    gc.gc(repo, "1.hour.ago", "now", now=later.time / 1000 + 3600)
    assert [o.command for o in oplog.log(repo)] == ["gc", "rewind", "expired"]
    for gone in (deleted, rewind):  # one expired by the first gc, one by the second
        with pytest.raises(RevisionError) as err:
            porcelain.undo(repo, gone.oid.hex()[:10])
        assert "expired by 'opal gc'" in err.value.message
    porcelain.undo(repo, later.oid.hex()[:10])  # the id before both gcs still works


def test_gc_now_leaves_nothing_to_undo_and_says_why(repo, project, home):
    _history(repo, project, home)
    r = opal("gc", "--expire-oplog", "now", "--prune", "now", cwd=project, env={"HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert "expired " in r.stdout and "0 kept" in r.stdout and "git gc --prune=now:" in r.stdout
    r = opal("undo", cwd=project, env={"HOME": str(home)})
    assert "nothing to undo: 'opal gc' expired the operations before it" in r.stdout + r.stderr
    assert git("fsck", "--strict", cwd=str(project)).returncode == 0
    # The branches themselves are untouched: only what undo could bring back is gone.
    assert porcelain.log(repo, ["main"])


def test_dry_run_and_never_change_nothing(repo, project, home):
    _history(repo, project, home)
    before = repo.refs.get(OPLOG_REF)
    r = opal("gc", "--dry-run", "--expire-oplog", "now", "--json", cwd=project, env={"HOME": str(home)})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["dry_run"] is True and out["operations_expired"] > 0 and out["op"] is None
    assert repo.refs.get(OPLOG_REF) == before
    res = gc.gc(repo, "never", "never")
    assert res.expired == 0 and res.op is None and repo.refs.get(OPLOG_REF) == before


# ------------------------------------------------------------------ purge --literal, then gc


def _session_with_literal(home, project, lines: int | None = None) -> tuple[str, str]:
    """A Claude session whose todo lists hold LITERAL (lines 4 to 52); placed up to
    ``lines``. Returns (the placed file, the whole modified session)."""
    with open(SESSION, encoding="utf-8") as fh:
        text = fh.read()
    assert "Check package.json for dependencies and scripts" in text
    text = text.replace("Check package.json for dependencies and scripts",
                        f"Check package.json; the staging db password is {LITERAL}")
    whole = os.path.join(str(home), "modified-session.jsonl")
    with open(whole, "w", encoding="utf-8") as fh:
        fh.write(text)
    return place(home, project, source=whole, lines=lines, name=os.path.basename(SESSION)), whole


def _every_ref_holds(repo, text: str) -> dict[str, bool]:
    """Whether the state each ref under refs/opal/ (but the op log) names holds ``text``."""
    from opalgit.history import sequence, states

    out = {}
    for name, oid in repo.refs.all().items():
        if name == OPLOG_REF:
            continue
        st = states.load_state(repo, oid)
        held = False
        for si in sequence.iter_items(repo.store, st.root):
            turn = states.turn_of(repo, si.item)  # payloads resolved
            value = turn.record if turn.has_record else (turn.line if isinstance(turn.line, bytes) else turn.blocks)
            held |= text in (value.decode("utf-8", "replace") if isinstance(value, bytes) else json.dumps(value, default=repr))
        out[name] = held
    return out


def _objects_hold(repo, text: str) -> bool:
    needle = text.encode()
    return any(needle in b for b in every_object_text(repo.common_dir + "/"))


def test_purge_literal_rewrites_every_ref_is_undoable_until_gc_then_no_object_holds_it(repo, project, home, tmp_path):
    env = env_of(home)
    path, whole = _session_with_literal(home, project, lines=30)
    porcelain.commit(repo, env, str(project))
    assert not redaction.scan_states(repo, [porcelain.branch_head(repo, "main")]).leaks  # no rule knows it
    porcelain.branch_create(repo, "feature")
    porcelain.switch(repo, "feature")
    cleanup.drop(repo, "HEAD:1..HEAD:1")  # a state of its own on top
    porcelain.switch(repo, "main")
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare))
    git("remote", "add", "origin", "file://" + str(bare), cwd=str(project))
    push(repo, env, "origin", gate=gate)  # the mistake: a remote-tracking head holds it too
    holders = _every_ref_holds(repo, LITERAL)
    assert holders and all(holders.values()), holders
    assert {"refs/opal/heads/main", "refs/opal/heads/feature", "refs/opal/remotes/origin/main"} <= set(holders)

    r = opal("secrets", "purge", "--literal", "short", cwd=project, env={"HOME": str(home)})
    assert r.returncode == 2 and "at least 8 characters" in r.stderr
    r = opal("secrets", "purge", "--literal", LITERAL, "--json", cwd=project, env={"HOME": str(home)})
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert LITERAL not in r.stdout + r.stderr
    assert set(res["refs"]) == set(holders) and res["kinds"] == ["literal"] and res["op"]
    assert not any(_every_ref_holds(repo, LITERAL).values())
    purge_op = next(oplog.log(repo))
    assert purge_op.command == "purge" and purge_op.oid.hex() == res["op"]
    # The vault has it: the owner's export puts it back, and the next commit of the
    # same session (the agent's file still holds it, and the new lines too) redacts it.
    assert LITERAL in redaction.vault(repo).mapping().values()
    grow(path, source=whole, start=30)
    porcelain.commit(repo, env, str(project), message="again")
    assert not any(_every_ref_holds(repo, LITERAL).values())
    assert not redaction.scan_states(repo, [porcelain.branch_head(repo, "main")]).leaks

    # Undoable until gc: undo puts the old states back, and the scan now knows the literal.
    undo_main = porcelain.undo(repo)  # the commit after the purge
    porcelain.undo(repo, res["op"])
    assert all(_every_ref_holds(repo, LITERAL).values())
    assert redaction.scan_states(repo, [porcelain.branch_head(repo, "main")]).leaks
    unpurge = next(oplog.log(repo))
    redo = porcelain.undo(repo, unpurge.oid.hex())  # and redo: the purge is in effect again
    assert not any(_every_ref_holds(repo, LITERAL).values())
    assert undo_main.command == "undo"

    assert _objects_hold(repo, LITERAL)  # the old states are still there for undo
    r = opal("gc", "--json", cwd=project, env={"HOME": str(home)})  # default ages: the purge decides
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # The redo put the purge back in effect (and keeps the old states, as its undo moved
    # the refs to them): gc expires it and everything before it.
    assert out["purge"] == redo.oid.hex() and out["prune"] == "now" and out["operations_expired"] >= 1
    assert not _objects_hold(repo, LITERAL)
    assert git("fsck", "--strict", cwd=str(project)).returncode == 0
    r = opal("undo", res["op"][:10], cwd=project, env={"HOME": str(home)})
    assert r.returncode != 0 and "expired by 'opal gc'" in r.stderr
    assert not any(_every_ref_holds(repo, LITERAL).values())


def test_a_reflog_of_an_opal_ref_does_not_keep_a_purged_state(repo, project, home):
    # With core.logAllRefUpdates=always git logs refs/opal/ too, and git gc keeps what
    # a reflog names for 90 days: opal gc expires those entries with the objects.
    git("config", "core.logAllRefUpdates", "always", cwd=str(project))
    _session_with_literal(home, project)
    porcelain.commit(repo, env_of(home), str(project))
    assert os.path.exists(os.path.join(repo.common_dir, "logs", "refs", "opal", "heads", "main"))
    redaction.purge(repo, literals=[LITERAL])
    gc.gc(repo)
    assert not _objects_hold(repo, LITERAL)
    assert git("fsck", "--strict", cwd=str(project)).returncode == 0


def test_purge_of_named_branches_only_and_a_dry_run(repo, project, home):
    _session_with_literal(home, project)
    porcelain.commit(repo, {"HOME": str(home)}, str(project))
    porcelain.branch_create(repo, "other")
    plan = redaction.purge(repo, ["main"], literals=[LITERAL], dry_run=True)
    assert set(plan.refs) == {"refs/opal/heads/main"} and plan.op is None
    assert LITERAL not in redaction.vault(repo).mapping().values()  # a dry run writes nothing
    res = redaction.purge(repo, ["main"], literals=[LITERAL])
    assert set(res.branches) == {"main"}
    holds = _every_ref_holds(repo, LITERAL)
    assert holds == {"refs/opal/heads/main": False, "refs/opal/heads/other": True}
    # What was left is named by the scan, which knows the literal from now on.
    assert redaction.scan_states(repo, [porcelain.branch_head(repo, "other")]).leaks
    with pytest.raises(RevisionError):
        redaction.purge(repo, ["nope"], literals=[LITERAL])


def test_a_gc_with_nothing_new_to_expire_writes_nothing(repo, project, home):
    _deleted, _x, rewind = _history(repo, project, home)
    later = rewind.time / 1000 + 3600
    first = gc.gc(repo, "1.hour.ago", "now", now=later)
    head = repo.refs.get(OPLOG_REF)
    again = gc.gc(repo, "1.hour.ago", "now", now=later + 86400 * 365)
    assert first.expired > 0 and again.op is not None  # the rewind is old now too
    assert [o.command for o in oplog.log(repo)] == ["gc", "expired"]
    head = repo.refs.get(OPLOG_REF)
    # Only what earlier gcs recorded would go: not worth writing the log again.
    third = gc.gc(repo, "1.hour.ago", "now", now=later + 86400 * 365)
    assert third.expired == 0 and third.op is None and repo.refs.get(OPLOG_REF) == head
