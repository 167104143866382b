"""The repository the browser tests look at, made the way a user makes one, and the
real ``opal web`` and Chromium that show it.

The repository is built once per module by the real commands in the order a user
types them: a Claude Code session in Claude's own folder, ``opal hooks install``, two
code commits that the post-commit hook records and links, a fork with a change of its
own, a rewind and a merge of the fork, a rewind taken back by ``opal undo`` (a commit
only the op log keeps), a push to a bare remote and a fetch, and a second session
holding secrets on a branch of its own.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.cli.test_web import Web
from tests.conftest import FIXTURES, ROOT, git, opal
from tests.unit.test_porcelain import grow, place
from tests.web.browser import SHOTS_ENV, Browser, require

DEMO = os.path.join(ROOT, "opalgit", "demo_data", "claude-session.jsonl")
SECRETS = os.path.join(FIXTURES, "secrets", "session.jsonl")
#: A key in the secrets session's turn 3 (a tool result), which opal stores as a placeholder.
SECRET = "AKIAER4UISCXD5M2LJG2"
FIRST_LINES = 24  # the session as it stood at the first code commit


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/web/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.web)


class Site:
    """A built repository: where it is, the HOME its commands run with, and ``run``."""

    def __init__(self, root) -> None:
        self.root = root
        self.project = root / "project"
        self.home = root / "home"
        self.env = {"HOME": str(self.home)}

    def run(self, *args: str, ok: bool = True):
        r = opal(*args, cwd=self.project, env=self.env)
        if ok:
            assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    def json(self, *args: str):
        return json.loads(self.run(*args, "--json").stdout)

    def git(self, *args: str) -> str:
        """The real git in the project, with this site's HOME (its hooks find the sessions there)."""
        return git(*args, cwd=str(self.project), env=self.env, timeout=300).stdout


def demo_file(path: str) -> str:
    """What the demo session's Write and Edit calls leave in ``path`` (relative to its
    project), so that ``opal blame`` has agent-written lines to find."""
    text = None
    with open(DEMO, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            content = (rec.get("message") or {}).get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") != "tool_use" or not str(block["input"].get("file_path", "")).endswith("/" + path):
                    continue
                args = block["input"]
                if block["name"] == "Write":
                    text = args["content"]
                elif block["name"] == "Edit" and text is not None:
                    text = text.replace(args["old_string"], args["new_string"], 1)
    assert text is not None, path
    return text


def build(root) -> Site:
    site = Site(root)
    site.home.mkdir()
    p = site.project
    p.mkdir()
    git("init", "-q", str(p))
    (p / "README.md").write_text("# weatherctl\n\nForecasts on the command line.\n")
    site.git("add", "README.md")
    site.git("commit", "-q", "-m", "initial code")

    session = place(site.home, p, DEMO, lines=FIRST_LINES)
    site.run("init")
    site.run("hooks", "install")
    (p / "weatherctl").mkdir()
    (p / "weatherctl" / "__init__.py").write_text("")
    site.git("add", "weatherctl")
    site.git("commit", "-q", "-m", "weatherctl package")         # the hook records the first 24 lines
    grow(session, DEMO, start=FIRST_LINES)
    (p / "weatherctl" / "cache.py").write_text(demo_file("weatherctl/cache.py"))
    site.git("add", "weatherctl/cache.py")
    site.git("commit", "-q", "-m", "forecast cache, written by the agent")  # ...and the rest

    site.run("switch", "-c", "fork", "HEAD:20")
    site.run("drop", "HEAD:2..HEAD:3")
    site.run("switch", "main")
    site.run("rewind", "2")
    site.run("merge", "fork", "--strategy", "both", "--force", "-m", "merge fork")
    site.run("rewind", "3")
    site.run("undo")                                              # the rewind stays in the op log only

    remote = root / "remote.git"
    git("init", "-q", "--bare", str(remote))
    site.git("remote", "add", "origin", remote.as_uri())
    site.run("push", "origin", "main")
    site.run("fetch", "origin")

    site.run("switch", "-c", "secrets")
    site.run("commit", "--file", SECRETS, "-m", "deploy session")
    site.run("switch", "main")
    return site


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Site:
    return build(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def server(site):
    w = Web(site.project, env=site.env)
    yield w
    code, err = w.stop()
    assert code == 0, err


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    require()
    b = Browser(str(tmp_path_factory.mktemp("chromium-profile")))
    yield b
    b.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> str:
    """The folder screenshots go to (docs/web when OPAL_WEB_SCREENSHOTS says so)."""
    folder = os.environ.get(SHOTS_ENV)
    if folder:
        return folder if os.path.isabs(folder) else os.path.join(ROOT, folder)
    return str(tmp_path_factory.mktemp("screenshots"))


@pytest.fixture(scope="module")
def page(server, browser):
    """The browser on the graph page, let in by the printed URL (token traded for the cookie)."""
    browser.open(server.url)
    return browser


def copy_site(site: Site, root) -> Site:
    """A copy of a built site (project, remote and HOME with its vault) to change freely."""
    shutil.copytree(site.root, root, symlinks=True)
    return Site(root)
