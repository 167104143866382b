"""opal's hooks chained with real hook managers, each set up as its documentation says:
husky v9 and lefthook (npm) and pre-commit (PyPI), at pinned versions
(scripts/install-hook-managers.sh installs them), and hooks that dispatch on their own
name as overcommit's do.

Each user setup has a hook that writes a marker and one that refuses (exit 1, unless a
file says to let the push through). After 'opal hooks install' the user's hooks still
run, in their order, with their exit status kept, and opal records the state;
'opal hooks uninstall' gives back the user's setup byte for byte.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import stat
import subprocess
import sys

import pytest

from opalgit.store.repo import Repository
from opalgit.sync import links
from tests.conftest import ROOT, git, opal
from tests.unit.test_porcelain import place

pytestmark = pytest.mark.compat

PINNED = {"husky": "9.1.7", "lefthook": "2.2.1", "pre-commit": "4.7.0"}  # scripts/install-hook-managers.sh
MANAGERS = os.environ.get("OPAL_HOOK_MANAGERS_DIR", os.path.join(ROOT, ".hook-managers"))


def _npm_tool(name: str) -> str:
    """The pinned npm hook manager's command, or skip saying why it is missing."""
    binary = os.path.join(MANAGERS, "node_modules", ".bin", name)
    pj = os.path.join(MANAGERS, "node_modules", name, "package.json")
    if not os.path.exists(binary) or not os.path.exists(pj):
        pytest.skip(f"{name} is not installed in {MANAGERS}: run scripts/install-hook-managers.sh")
    have = json.load(open(pj)).get("version")
    if have != PINNED[name]:
        pytest.skip(f"{name} {have} is installed, the tests pin {PINNED[name]}: run scripts/install-hook-managers.sh")
    return binary


def _pre_commit() -> list[str]:
    try:
        have = importlib.metadata.version("pre-commit")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pre-commit is not installed in this Python: run scripts/install-hook-managers.sh")
    if have != PINNED["pre-commit"]:
        pytest.skip(f"pre-commit {have} is installed, the tests pin {PINNED['pre-commit']}")
    return [sys.executable, "-m", "pre_commit"]


def tree(folder) -> dict:
    """Every file under ``folder``, recursively: relative path -> (bytes or link target, mode)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in sorted(dirs + files):
            p = os.path.join(root, name)
            rel = os.path.relpath(p, folder)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isfile(p):
                out[rel] = (open(p, "rb").read(), stat.S_IMODE(os.lstat(p).st_mode))
            else:
                out[rel] = ("dir", stat.S_IMODE(os.lstat(p).st_mode))
    return out


def script(path, text: str) -> str:
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o755)
    return str(path)


def run(args, cwd, env=None, check=True):
    r = subprocess.run(args, cwd=str(cwd), capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300)
    if check:
        assert r.returncode == 0, f"{args}: {r.stdout}\n{r.stderr}"
    return r


def marks(path) -> list[str]:
    return open(path).read().split("\n")[:-1] if os.path.exists(path) else []


class Setup:
    """A user's hooks: where they live (to compare byte for byte) and what they mark."""

    def __init__(self, folders, marker, allow, env=None):
        self.folders, self.marker, self.allow, self.env = folders, marker, allow, env or {}

    def snapshot(self, project):
        hooks_path = git("config", "--get", "core.hooksPath", cwd=str(project), check=False).stdout
        return hooks_path, {str(f): tree(f) for f in self.folders}


def commit(project, message, env):
    with open(os.path.join(str(project), "code.txt"), "a") as fh:
        fh.write(message + "\n")
    git("add", "code.txt", cwd=str(project))
    r = run(["git", "commit", "-q", "-m", message], project, env)
    return git("rev-parse", "HEAD", cwd=str(project)).stdout.strip(), r.stderr


def scenario(setup: Setup, project, home, tmp_path, *, before_commit=(), at_commit=(), at_push=()):
    """The user's hooks run in their order with their status kept, opal records, and
    uninstall gives the setup back byte for byte. ``at_*``: the marker lines the user's
    hooks write at each step, in order."""
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare))
    git("remote", "add", "origin", str(bare), cwd=str(project))
    before = setup.snapshot(project)

    r = opal("hooks", "install", cwd=project)
    assert r.returncode == 0, r.stderr
    assert [s.state for s in _status(project)] == ["installed"] * 3

    place(home, project, lines=12)
    sha, err = commit(project, "parser", setup.env)
    expected = [*before_commit, *(m.format(sha=sha) for m in at_commit)]
    assert marks(setup.marker) == expected, err
    assert "opal: recorded" in err, err
    assert links.get_link(Repository.discover(str(project)), bytes.fromhex(sha)) is not None

    # The user's pre-push refuses: the push is refused, after the hooks before it ran.
    r = run(["git", "push", "-q", "origin", "main"], project, setup.env, check=False)
    assert r.returncode != 0, r.stderr
    expected += list(at_push)
    assert marks(setup.marker) == expected, r.stderr
    assert git("ls-remote", str(bare), cwd=str(project)).stdout == ""
    # ... and when it lets the push through, the push goes.
    open(setup.allow, "w").close()
    r = run(["git", "push", "-q", "origin", "main"], project, setup.env, check=False)
    assert r.returncode == 0, r.stderr
    assert sha in git("ls-remote", str(bare), cwd=str(project)).stdout

    r = opal("hooks", "uninstall", cwd=project)
    assert r.returncode == 0, r.stderr
    assert setup.snapshot(project) == before


def _status(project):
    from opalgit.hooks import install as hooks

    return hooks.status(Repository.discover(str(project)), os.environ, sys.executable)


def refusing(tmp_path, allow, marker, label):
    """A hook body (sh) that marks, then refuses unless ``allow`` exists."""
    return f'echo "{label} $1" >> {marker}\n[ -e {allow} ] || exit 1\n'


def test_husky_v9(project, home, tmp_path):
    husky = _npm_tool("husky")
    marker, allow = tmp_path / "marker", tmp_path / "allow"
    (project / "package.json").write_text('{\n  "name": "demo",\n  "version": "1.0.0"\n}\n')
    # husky's docs: 'npx husky init', then edit the hooks in .husky/.
    run([husky, "init"], project)
    assert git("config", "core.hooksPath", cwd=str(project)).stdout.strip() == ".husky/_"
    (project / ".husky" / "pre-commit").write_text(f'echo "husky pre-commit" >> {marker}\n')
    (project / ".husky" / "post-commit").write_text(f'echo "husky post-commit $(git rev-parse HEAD)" >> {marker}\n')
    (project / ".husky" / "pre-push").write_text(refusing(tmp_path, allow, marker, "husky pre-push"))
    setup = Setup([project / ".husky"], marker, allow)
    scenario(
        setup, project, home, tmp_path,
        before_commit=["husky pre-commit"], at_commit=["husky post-commit {sha}"], at_push=["husky pre-push origin"],
    )


def test_pre_commit(project, home, tmp_path):
    pre_commit = _pre_commit()
    marker, allow = tmp_path / "marker", tmp_path / "allow"
    first = script(tmp_path / "first.sh", f'#!/bin/sh\necho "first $1" >> {marker}\n')
    refuse = script(tmp_path / "refuse.sh", f'#!/bin/sh\necho "refuse $1" >> {marker}\n[ -e {allow} ] || exit 1\n')

    def hook(id_, entry, stage):
        return (
            f"      - {{id: {id_}, name: {id_}, entry: {entry} {stage}, language: system, pass_filenames: false,"
            f" always_run: true, stages: [{stage}]}}\n"
        )

    # pre-commit's docs: a .pre-commit-config.yaml, then 'pre-commit install'; local hooks.
    (project / ".pre-commit-config.yaml").write_text(
        "default_install_hook_types: [pre-commit, post-commit, pre-push]\n"
        "repos:\n"
        "  - repo: local\n"
        "    hooks:\n"
        + hook("first-commit", first, "pre-commit")
        + hook("first-post", first, "post-commit")
        + hook("first-push", first, "pre-push")
        + hook("refuse", refuse, "pre-push")
    )
    git("add", ".pre-commit-config.yaml", cwd=str(project))
    git("commit", "-q", "--no-verify", "-m", "pre-commit config", cwd=str(project))
    run([*pre_commit, "install"], project)
    setup = Setup([project / ".git" / "hooks"], marker, allow)
    scenario(
        setup, project, home, tmp_path,
        before_commit=["first pre-commit"], at_commit=["first post-commit"], at_push=["first pre-push", "refuse pre-push"],
    )


def test_lefthook(project, home, tmp_path):
    lefthook = _npm_tool("lefthook")
    marker, allow = tmp_path / "marker", tmp_path / "allow"
    # lefthook's docs: a lefthook.yml, then 'lefthook install'; piped jobs run in order
    # and stop at the first that fails.
    (project / "lefthook.yml").write_text(
        "post-commit:\n"
        "  jobs:\n"
        f"    - name: mark\n      run: echo \"lefthook post-commit $(git rev-parse HEAD)\" >> {marker}\n"
        "pre-push:\n"
        "  piped: true\n"
        "  jobs:\n"
        f"    - name: first\n      run: echo \"lefthook first\" >> {marker}\n"
        f"    - name: refuse\n      run: echo \"lefthook refuse\" >> {marker}; test -e {allow}\n"
    )
    env = {"PATH": os.path.dirname(lefthook) + os.pathsep + os.environ["PATH"]}
    run([lefthook, "install"], project, env)
    setup = Setup([project / ".git" / "hooks"], marker, allow, env)
    scenario(
        setup, project, home, tmp_path,
        at_commit=["lefthook post-commit {sha}"], at_push=["lefthook first", "lefthook refuse"],
    )


@pytest.mark.parametrize("kind", ["python", "sh"])
def test_a_hook_that_dispatches_on_its_own_name(project, home, tmp_path, kind):
    """As overcommit does: one program, linked as each hook, that acts on basename($0)."""
    marker, allow = tmp_path / "marker", tmp_path / "allow"
    hooks_dir = project / ".git" / "hooks"
    if kind == "python":
        body = (
            f"#!{sys.executable}\nimport os, sys\n"
            "name = os.path.basename(sys.argv[0])\n"
            f"open({str(marker)!r}, 'a').write(name + ' ' + ' '.join(sys.argv[1:2]) + '\\n')\n"
            f"sys.exit(1 if name == 'pre-push' and not os.path.exists({str(allow)!r}) else 0)\n"
        )
    else:
        # A shell dispatcher may also find its files from dirname "$0": both must hold.
        body = (
            "#!/bin/sh\n"
            f'[ "$(cd "$(dirname "$0")" && pwd)" = "{hooks_dir}" ] || {{ echo "wrong dirname $0" >> {marker}; exit 2; }}\n'
            f'echo "$(basename "$0") $1" >> {marker}\n'
            f'case $(basename "$0") in pre-push) [ -e {allow} ] || exit 1 ;; esac\n'
        )
    script(hooks_dir / "dispatch-hook", body)
    for name in ("post-commit", "pre-push"):
        os.symlink("dispatch-hook", hooks_dir / name)
    setup = Setup([hooks_dir], marker, allow)
    scenario(setup, project, home, tmp_path, at_commit=["post-commit "], at_push=["pre-push origin"])


@pytest.mark.parametrize("manager", ["pre-commit", "lefthook"])
def test_a_hook_manager_installed_after_opal(project, home, tmp_path, manager):
    """pre-commit and lefthook move a hook in their way aside when they install (to
    NAME.legacy, NAME.old): opal's hooks say so, and installing them again chains the
    manager's hook and removes opal's moved copy."""
    marker = tmp_path / "marker"
    env = {}
    if manager == "pre-commit":
        mark = script(tmp_path / "mark.sh", f'#!/bin/sh\necho "pre-commit post-commit" >> {marker}\n')
        (project / ".pre-commit-config.yaml").write_text(
            "repos:\n  - repo: local\n    hooks:\n"
            f"      - {{id: mark, name: mark, entry: {mark}, language: system, pass_filenames: false,"
            " always_run: true, stages: [post-commit]}\n"
        )
        git("add", ".pre-commit-config.yaml", cwd=str(project))
        git("commit", "-q", "-m", "config", cwd=str(project))
        install = [*_pre_commit(), "install", "--hook-type", "post-commit"]
    else:
        lefthook = _npm_tool("lefthook")
        (project / "lefthook.yml").write_text(
            f"post-commit:\n  jobs:\n    - name: mark\n      run: echo lefthook post-commit >> {marker}\n"
        )
        env = {"PATH": os.path.dirname(lefthook) + os.pathsep + os.environ["PATH"]}
        install = [lefthook, "install"]
    assert opal("hooks", "install", cwd=project).returncode == 0
    run(install, project, env)
    assert [s.state for s in _status(project)][0] == "displaced"

    r = opal("hooks", "install", cwd=project)
    assert r.returncode == 0 and "removed opal's hook that another hook manager had moved" in r.stdout, r.stdout
    hooks_dir = project / ".git" / "hooks"
    assert not [n for n in os.listdir(hooks_dir) if n.endswith((".legacy", ".old"))]
    place(home, project, lines=12)
    sha, err = commit(project, "parser", env)
    assert marks(marker) == [f"{manager} post-commit"], err
    assert "opal: recorded" in err
