"""opal's config file read without libgit2 gives what libgit2 and git give."""

from __future__ import annotations

import pygit2
import pytest

from opalgit.store.gitfiles import configfile
from tests.conftest import git

VALUES = {
    "core.format": "1",
    "secrets.redact": "false",
    "push.namespace": "team/alice",
    'branch.main.session': "claude:2542131b-e950-4ff5-8335-9106e85688ff",
    "branch.feature/x.y.session": "codex:abc",
    "branch.MixedCase.session": "gemini:1",
    "note.odd.text": 'a "quoted" # not a comment ; nor this \\ backslash',
    "note.odd.spaces": "  padded  ",
    "note.odd.tab": "a\tb",
}


@pytest.mark.parametrize("writer", ["libgit2", "git"])
def test_values_written_by_libgit2_or_git_read_back_the_same(tmp_path, writer):
    path = str(tmp_path / "config")
    open(path, "w").close()
    if writer == "libgit2":
        cfg = pygit2.Config(path)
        for k, v in VALUES.items():
            cfg[k] = v
    else:
        for k, v in VALUES.items():
            git("config", "-f", path, k, v)
    lib = pygit2.Config(path)
    for k, v in VALUES.items():
        assert configfile.get(path, k) == lib[k] == v
    assert configfile.get(path, "BRANCH.main.SESSION") == VALUES["branch.main.session"]
    assert configfile.get(path, "branch.mixedcase.session") is None  # subsections keep their case
    assert configfile.get(path, "push.nothing") is None
    assert configfile.get(str(tmp_path / "absent"), "core.format") is None


def test_the_last_value_wins_and_a_bare_key_is_true(tmp_path):
    path = tmp_path / "config"
    path.write_text('[push]\n\twithCode = false\n[push]\n\twithCode = true ; later\n[secrets]\n\tredact\n')
    assert configfile.get(str(path), "push.withCode") == "true"
    assert configfile.get(str(path), "secrets.redact") == "true"
    lib = pygit2.Config(str(path))
    assert lib["push.withCode"] == "true"


@pytest.mark.parametrize(
    "text",
    [
        "[include]\n\tpath = other\n",
        '[includeIf "gitdir:/x"]\n\tpath = other\n',
        "[push]\n\tnamespace = a \\\n b\n",
        '[push]\n\tnamespace = "open\n',
        "[push]\n\tnamespace = a\\qb\n",
        "[branch.old]\n\tsession = x\n",
    ],
)
def test_syntax_beyond_what_libgit2_writes_is_left_to_libgit2(tmp_path, text):
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(configfile.Unsupported):
        configfile.get(str(path), "push.namespace")
        configfile.get(str(path), "branch.old.session")
