"""The ``blame`` row: ``opal blame`` of a 2,000-line file that a Claude Code session edited
300 times over 50 code commits (with opal's hooks recording each), against ``git blame``
of the same file in the same run.

The session is written here, record by record, as Claude Code writes one (a prompt, an
``Edit`` call, its result), and grows between the code commits; a person edits the file
too, every tenth commit. The generator knows who wrote each line, so the row also says
whether opal's answer is right (``extra.wrong`` counts the lines it got wrong).
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid

from .util import Row, median

FULL = {"lines": 2000, "edits": 300, "commits": 50}
QUICK = {"lines": 200, "edits": 24, "commits": 6}


def _record(kind: str, sid: str, cwd: str, parent: str | None, when: float, message: dict) -> dict:
    return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": sid,
            "version": "2.0.0", "gitBranch": "main", "type": kind, "message": message, "uuid": str(uuid.uuid4()),
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + f".{int(when * 1000) % 1000:03d}Z"}


class Story:
    """The file, the session that edits it, and who wrote each line."""

    def __init__(self, repo: str, session_file: str, lines: int, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.repo, self.path = repo, os.path.join(repo, "big.py")
        self.session_file, self.sid = session_file, str(uuid.uuid4())
        self.parent: str | None = None
        self.n = 0
        self.lines = [(f"value_{k} = {k}  # original line {k}", "before") for k in range(lines)]
        self.turn = 0

    def fresh(self, who: str) -> str:
        self.n += 1
        return f"{who}_{self.n} = compute({self.n})  # written by {who}"

    def _append(self, *records: dict) -> None:
        with open(self.session_file, "a") as fh:
            for r in records:
                fh.write(json.dumps(r, separators=(",", ":")) + "\n")
                self.parent = r["uuid"]

    def agent_edit(self, when: float) -> None:
        i = self.rng.randrange(len(self.lines))
        new = [self.fresh("agent") for _ in range(self.rng.choice((1, 1, 2)))]
        old_text = self.lines[i][0] + "\n"
        self.turn += 1
        prompt = _record("user", self.sid, self.repo, self.parent, when, {"role": "user", "content": f"edit {self.turn}"})
        self._append(prompt)
        call = f"toolu_{uuid.uuid4().hex[:20]}"
        use = {"type": "tool_use", "id": call, "name": "Edit",
               "input": {"file_path": self.path, "old_string": old_text, "new_string": "".join(x + "\n" for x in new)}}
        # One record at a time: each is the child of the one before (a chain, not forks).
        self._append(_record("assistant", self.sid, self.repo, self.parent, when + 0.1,
                             {"id": f"msg_{self.turn}", "type": "message", "role": "assistant", "model": "claude-bench",
                              "content": [use], "stop_reason": "tool_use"}))
        self._append(_record("user", self.sid, self.repo, self.parent, when + 0.2,
                             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                                                           "content": "The file has been updated."}]}))
        self.lines[i:i + 1] = [(x, ("agent", f"edit {self.turn}")) for x in new]
        self.write()

    def human_edit(self) -> None:
        i = self.rng.randrange(len(self.lines))
        self.lines[i] = (self.fresh("person"), "pending")
        self.write()

    def write(self) -> None:
        with open(self.path, "w") as fh:
            fh.write("".join(x + "\n" for x, _ in self.lines))

    def committed(self, sha: str) -> None:
        self.lines = [(x, ("human", sha) if o == "pending" else o) for x, o in self.lines]


def bench_blame(suite) -> None:
    size = QUICK if suite.cfg.quick else FULL
    repo = suite.fresh_repo("blame")
    suite.opal("hooks", "install", cwd=repo).check()
    from opalgit.agents.claude.files import project_key

    folder = os.path.join(suite.home, ".claude", "projects", project_key(os.path.realpath(repo)))
    os.makedirs(folder, exist_ok=True)
    story = Story(repo, "", size["lines"])
    story.session_file = os.path.join(folder, story.sid + ".jsonl")
    start = time.time() - 86400  # a day ago, a minute per edit
    env = {**suite.env, "OPAL_HOOK_TIMEOUT": "120"}

    def commit(msg: str, when: float) -> str:
        stamp = f"@{int(when)} +0000"
        e = {**env, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        suite.git("add", "big.py", cwd=repo, env=e).check()
        suite.git("commit", "-q", "-m", msg, cwd=repo, env=e).check()
        return suite.git("rev-parse", "HEAD", cwd=repo).check().out.strip()

    story.write()
    commit("the big file", start - 60)
    story.lines = [(x, ("unattributed", None)) for x, _ in story.lines]
    per = size["edits"] // size["commits"]
    t = start
    for c in range(size["commits"]):
        for _ in range(per):
            t += 60
            story.agent_edit(t)
        if c % 10 == 9:
            story.human_edit()
        story.committed(commit(f"step {c}", t + 30))
    walls, git_walls = [], []
    for _ in range(suite.cfg.runs):  # the same output shape on both sides, taking turns
        walls.append(suite.opal("blame", "--porcelain", "big.py", cwd=repo).check().wall)
        git_walls.append(suite.git("blame", "--porcelain", "big.py", cwd=repo).check().wall)
    wrong = _wrong(json.loads(suite.opal("blame", "big.py", "--json", cwd=repo).check().out)["lines"], story.lines)
    suite.row(Row("blame", f"opal blame --porcelain, {size['lines']}-line file, {size['edits']} agent edits over "
                           f"{size['commits']} code commits", median(walls), "s", median(git_walls),
                  "git blame --porcelain of the same file",
                  note=f"{wrong} of {len(story.lines)} lines attributed wrongly" if wrong else
                  f"all {len(story.lines)} lines attributed as the generator wrote them",
                  extra={"runs_wall": walls, "baseline_wall": git_walls, "wrong": wrong, **size}))


def _wrong(got: list[dict], want: list) -> int:
    bad = abs(len(got) - len(want))
    for g, (text, who) in zip(got, want):
        o = g["owner"]
        if g["text"] != text:
            bad += 1
        elif who[0] == "agent":
            bad += o["kind"] != "agent" or o.get("prompt") != who[1]
        elif who[0] == "human":
            bad += o["kind"] != "human" or o.get("commit") != who[1]
        else:
            bad += o["kind"] != "unattributed"
    return bad
