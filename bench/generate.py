"""Realistic large agent sessions, deterministic from a seed, streamed to disk.

Each generator writes one agent's native session file (Claude Code ``.jsonl``, Codex
CLI rollout ``.jsonl``, Gemini CLI ``.jsonl``) shaped like the real ones in
``tests/fixtures``: prompt cycles made of many tool calls whose outputs carry most
of the bytes, the same files read again and again (byte-identical until an edit
changes them), long system-prompt-like snapshots repeated at every prompt, signed
thinking blocks, token-count and bookkeeping records. The Claude file is one
``uuid``/``parentUuid`` chain.

Nothing is held in memory but a bounded state (the project's current files and the
text pools): records are written as they are made, so a 250 MB file costs the
generator a few MB.

    python -m bench.generate --agent claude --size 50M --out /tmp/s.jsonl
    python -m bench.generate --agent codex --turns 10000 --out /tmp/r.jsonl

A *turn* here is what opal numbers as a turn for Claude (a user or assistant
record of the main chain; attachments, queue operations and other bookkeeping are
not turns). For Codex and Gemini it counts model-visible messages, calls and
results, which is close to, but not guaranteed equal to, opal's count.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import sys
import uuid as _uuid
from dataclasses import dataclass, field
from typing import Callable

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)

AGENTS = ("claude", "codex", "gemini")


def dumps(value) -> bytes:
    """Compact JSON as the agents write it (what opal reproduces exactly)."""
    return _encoder.encode(value).encode("utf-8")


def parse_size(text: str) -> int:
    """``50M``, ``1.5G``, ``800k`` or a plain number of bytes."""
    t = text.strip().upper().rstrip("B")
    mult = 1
    for suffix, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if t.endswith(suffix):
            t, mult = t[:-1], m
            break
    return int(float(t) * mult)


# ----------------------------------------------------------------------------- text


_WORDS = """
account active adapter agent align allocate append apply archive assert async batch
block branch buffer build bundle cache call cancel chunk client close commit compare
config connect context convert copy count create cursor daemon data decode default
delete depth diff digest dispatch document drain emit encode entry error event export
fetch field filter flush format frame handle hash header index input insert item
iterate join key label layer limit line link load lock log lookup map match merge
message meta migrate mode model module mount node normalize object offset open option
order output pack page parse patch path peer pending pipe plan pool prefix process
queue range read record reduce ref refresh region release render replay report
request reset resolve result retry return revision root route row rule run sample
scan schema scope search select send sequence serve session shard signal size slice
snapshot sort source span split stage state status store stream summary sync table
tail task tenant test text thread timeout token tool trace tree trim turn type undo
unit update upload user value verify version view walk watch window worker write
""".split()

_PROSE = """
the a this that each every some our its their when while because although so then
first next finally also instead however therefore still already only just maybe
should would could must can will might need want keep make take give find check
look see note fix add remove change move rename split merge test run read write
""".split()


def _ident(rng: random.Random) -> str:
    n = rng.choice((1, 2, 2, 3))
    return "_".join(rng.choice(_WORDS) for _ in range(n))


def _camel(rng: random.Random) -> str:
    return "".join(w.capitalize() for w in (rng.choice(_WORDS) for _ in range(rng.choice((1, 2, 3)))))


class Corpus:
    """Pools of code lines, prose sentences and log lines, made once from the seed."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.code = [self._code_line() for _ in range(6000)]
        self.prose = [self._sentence() for _ in range(3000)]
        self.logs = [self._log_line() for _ in range(4000)]

    def _code_line(self) -> str:
        r = self.rng
        ind = " " * (4 * r.choice((0, 1, 1, 2, 2, 2, 3, 3, 4)))
        k = r.randrange(14)
        a, b, c = _ident(r), _ident(r), _ident(r)
        if k == 0:
            return f"{ind}def {a}(self, {b}: {_camel(r)}, {c}: int = {r.randrange(100)}) -> {_camel(r)}:"
        if k == 1:
            return f"{ind}return self.{a}({b}, {c}={r.choice(('None', 'True', 'False', str(r.randrange(1000))))})"
        if k == 2:
            return f"{ind}if {a} is not None and {b}.{c} > {r.randrange(4096)}:"
        if k == 3:
            return f"{ind}for {a} in self.{b}.{c}():"
        if k == 4:
            return f"{ind}{a} = {_camel(r)}({b}, {c}=self.{_ident(r)})"
        if k == 5:
            return f'{ind}raise {_camel(r)}Error(f"{a} {{{b}!r}} cannot {c}")'
        if k == 6:
            return f"{ind}# {' '.join(r.choice(_PROSE + _WORDS) for _ in range(r.randrange(4, 14)))}"
        if k == 7:
            return f"{ind}self.{a}[{b}] = {c}"
        if k == 8:
            return f"{ind}class {_camel(r)}({_camel(r)}):"
        if k == 9:
            return f"from .{a} import {_camel(r)}, {b}"
        if k == 10:
            return ""
        if k == 11:
            return f"{ind}{a}.append(({b}, {c}, {r.randrange(65536):#06x}))"
        if k == 12:
            return f'{ind}"""{" ".join(r.choice(_PROSE + _WORDS) for _ in range(r.randrange(5, 16))).capitalize()}."""'
        return f"{ind}yield from self.{a}({b}[{r.randrange(8)}:], {c})"

    def _sentence(self) -> str:
        r = self.rng
        words = [r.choice(_PROSE if r.random() < 0.45 else _WORDS) for _ in range(r.randrange(7, 26))]
        if r.random() < 0.3:
            words.insert(r.randrange(len(words)), f"`{_ident(r)}()`")
        return " ".join(words).capitalize() + r.choice((".", ".", ".", ":", "?"))

    def _log_line(self) -> str:
        r = self.rng
        k = r.randrange(6)
        if k == 0:
            return f"tests/test_{_ident(r)}.py::test_{_ident(r)} {r.choice(('PASSED', 'PASSED', 'PASSED', 'FAILED', 'SKIPPED'))} [{r.randrange(101):3d}%]"
        if k == 1:
            return f"{r.choice(('INFO', 'DEBUG', 'WARNING'))} {_ident(r)}: {self._sentence()} ({r.randrange(1000)} ms)"
        if k == 2:
            return f"  File \"/src/{_ident(r)}/{_ident(r)}.py\", line {r.randrange(1, 900)}, in {_ident(r)}"
        if k == 3:
            return f"{r.getrandbits(28):07x} {self._sentence()}"
        if k == 4:
            return f"-rw-r--r-- 1 dev dev {r.randrange(100, 90000):6d} Nov {r.randrange(1, 30):2d} 12:{r.randrange(60):02d} {_ident(r)}.py"
        return f"src/{_ident(r)}.py:{r.randrange(1, 900)}:{r.choice(self.code).strip()}"

    def paragraph(self, n: int) -> str:
        return " ".join(self.rng.choices(self.prose, k=n))

    def text_of_size(self, pool: list[str], size: int) -> str:
        """Lines from ``pool`` until about ``size`` characters."""
        out: list[str] = []
        total = 0
        r = self.rng
        while total < size:
            chunk = r.choices(pool, k=32)
            out.extend(chunk)
            total += sum(len(x) + 1 for x in chunk)
        return "\n".join(out)[:size]

    def unique_log(self, size: int) -> str:
        """Log output with fresh numbers on every line (timings, ids): barely repeats."""
        r = self.rng
        out: list[str] = []
        total = 0
        while total < size:
            line = f"[{r.randrange(10**6):06d}] {r.choice(self.logs)} t={r.random():.4f}s id={r.getrandbits(40):010x}"
            out.append(line)
            total += len(line) + 1
        return "\n".join(out)


class Project:
    """The files the agent works on: a few are hot (read again and again)."""

    def __init__(self, corpus: Corpus, rng: random.Random, root: str, n_files: int = 60, *,
                 big: bool = False) -> None:
        self.rng = rng
        self.corpus = corpus
        self.root = root
        self.paths = [f"{root}/src/{_ident(rng)}/{_ident(rng)}.py" for _ in range(n_files)]
        self.files: dict[str, list[str]] = {}
        for p in self.paths:
            # ``big``: the files of a real project an agent keeps coming back to (a
            # median of ~400 lines, 16 KB, up to 4,000), not the bench's small modules.
            n = int(min(4000, max(40, rng.lognormvariate(6.0, 0.8)))) if big else int(
                min(1500, max(20, rng.lognormvariate(5.0, 0.9))))
            self.files[p] = rng.choices(corpus.code, k=n)
        # Zipf-like popularity: the first files are read far more often (``big``: all
        # sixty are, a real session's working set, each read again and again).
        self.weights = [1.0 / (i + 1) ** (0.3 if big else 1.1) for i in range(n_files)]

    def pick(self) -> str:
        return self.rng.choices(self.paths, weights=self.weights, k=1)[0]

    def numbered(self, path: str, limit: int = 2000, *, arrow: bool = False) -> str:
        lines = self.files[path][:limit]
        if arrow:  # Claude Code's Read: `cat -n` with the number right-aligned and an arrow
            return "\n".join(f"{i:>6}\u2192{line}" for i, line in enumerate(lines, 1))
        return "\n".join(f"{i}\t{line}" for i, line in enumerate(lines, 1))

    def content(self, path: str) -> str:
        return "\n".join(self.files[path]) + "\n"

    def edit(self, path: str) -> tuple[str, str, int]:
        """Change a few lines; returns (old text, new text, first line)."""
        lines = self.files[path]
        i = self.rng.randrange(len(lines))
        n = min(len(lines) - i, self.rng.randint(1, 4))
        old = lines[i : i + n]
        new = self.rng.choices(self.corpus.code, k=self.rng.randint(1, 6))
        self.files[path] = lines[:i] + new + lines[i + n :]
        return "\n".join(old), "\n".join(new), i + 1

    def grep(self, word: str, limit: int) -> str:
        out = []
        for p in self.paths:
            for n, line in enumerate(self.files[p], 1):
                if word in line:
                    out.append(f"{p}:{n}:{line}")
                    if len(out) >= limit:
                        return "\n".join(out)
        return "\n".join(out)


# -------------------------------------------------------------------------- writing


@dataclass
class Stats:
    agent: str
    path: str
    bytes: int = 0
    records: int = 0
    turns: int = 0
    tool_calls: int = 0
    marks: dict = field(default_factory=dict)  # turns -> byte offset after that turn's record
    session_id: str = ""
    cwd: str = ""
    last_uuid: str | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


class _Sink:
    """Counts what is written and decides when to stop."""

    def __init__(self, fh, stats: Stats, size: int | None, turns: int | None, marks: set[int]) -> None:
        self.fh = fh
        self.stats = stats
        self.size = size
        self.turns = turns
        self.marks = marks

    def put(self, rec: dict, *, turn: bool = False, call: bool = False) -> None:
        data = dumps(rec) + b"\n"
        self.fh.write(data)
        st = self.stats
        st.bytes += len(data)
        st.records += 1
        if call:
            st.tool_calls += 1
        if turn:
            st.turns += 1
            if st.turns in self.marks:
                st.marks[st.turns] = st.bytes

    def turn_limit(self) -> bool:
        return self.turns is not None and self.stats.turns >= self.turns

    def size_reached(self) -> bool:
        return self.size is not None and self.stats.bytes >= self.size


class _Stop(Exception):
    pass


def _uuid4(rng: random.Random) -> str:
    return str(_uuid.UUID(int=rng.getrandbits(128), version=4))


def _iso(ms: int) -> str:
    import datetime as dt

    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.getrandbits(n * 8).to_bytes(n, "little")).decode()


#: The session shapes (``--profile``). "realistic" is the bench's original session,
#: "lean" its short-output variant; the others stress one thing each, and "real" mixes
#: them prompt by prompt (the large real-shaped session of the memory rows).
PROFILES = ("realistic", "lean", "reads", "outputs", "edits", "images", "small", "huge", "parallel", "real")
#: Steps of each shape, by kind and weight (the two original profiles draw as before).
_KINDS: dict[str, tuple[tuple[str, float], ...]] = {
    # Sixty files of a real project read again and again, Claude's way: the numbered
    # text in the tool_result and the raw file in toolUseResult.file.content.
    "reads": (("read", 0.93), ("edit", 0.03), ("bash", 0.02), ("grep", 0.02)),
    "outputs": (("bash", 0.75), ("read", 0.15), ("grep", 0.10)),
    # Edits of large files: Claude keeps the whole file before the edit (originalFile).
    "edits": (("edit", 0.70), ("read", 0.20), ("bash", 0.10)),
    "images": (("image", 0.45), ("read", 0.30), ("bash", 0.25)),
    "small": (("read", 0.42), ("bash", 0.28), ("grep", 0.12), ("edit", 0.13), ("write", 0.05)),
    # A few enormous outputs among ordinary steps.
    "huge": (("read", 0.40), ("bash", 0.28), ("grep", 0.12), ("edit", 0.13), ("write", 0.05), ("huge", 0.02)),
    "parallel": (("read", 0.42), ("bash", 0.28), ("grep", 0.12), ("edit", 0.13), ("write", 0.05)),
}
_KINDS["realistic_mix"] = _KINDS["parallel"]
#: What a prompt cycle of the "real" profile does (huge outputs: one step in 500).
_REAL_MIX = (("reads", 0.35), ("realistic_mix", 0.2), ("parallel", 0.15), ("edits", 0.1), ("outputs", 0.08),
             ("small", 0.07), ("images", 0.05))
#: Profiles whose project has real-sized files, read Claude's way (numbered with an arrow).
_BIG_FILES = ("reads", "edits", "huge", "parallel", "real", "images", "outputs")


class _Base:
    """Shared state of one generated session."""

    agent = ""

    def __init__(self, seed: int, *, profile: str = "realistic", session_id: str | None = None,
                 cwd: str | None = None, start_ms: int = 1_790_000_000_000) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}: one of {', '.join(PROFILES)}")
        self.rng = random.Random(seed)
        self.seed = seed
        self.profile = profile
        # What the current prompt cycle does: the profile, or for "real" one of the
        # shapes, drawn again at every prompt (a real session moves between them).
        self.mode = "realistic" if profile == "real" else profile
        self.corpus = Corpus(self.rng)
        self.cwd = cwd or f"/home/dev/work/{_ident(self.rng).replace('_', '-')}"
        self.project = Project(self.corpus, self.rng, self.cwd, big=profile in _BIG_FILES)
        self.images: list[str] = []  # base64 screenshots, some shown again
        self.session_id = session_id or _uuid4(self.rng)
        self.now = start_ms
        self.system_prompt = self.corpus.paragraph(60 if profile == "lean" else 140)
        self.tool_schema = self._tool_schema()
        self.sink: _Sink | None = None

    def tick(self, lo: int = 5, hi: int = 4000) -> str:
        self.now += self.rng.randint(lo, hi)
        return _iso(self.now)

    def _tool_schema(self) -> list[dict]:
        r = self.rng
        tools = []
        for name in ("Bash", "Read", "Edit", "Write", "Grep", "Glob", "Agent", "WebFetch", "TodoWrite", "NotebookEdit"):
            props = {
                _ident(r): {"type": r.choice(("string", "integer", "boolean")), "description": self.corpus.paragraph(2)}
                for _ in range(r.randint(2, 6))
            }
            tools.append({"name": name, "description": self.corpus.paragraph(r.randint(6, 30)),
                          "input_schema": {"type": "object", "properties": props, "required": list(props)[:1]}})
        return tools

    def next_mode(self) -> None:
        """For the "real" profile: what this prompt cycle does."""
        if self.profile == "real":
            modes, weights = zip(*_REAL_MIX)
            self.mode = self.rng.choices(modes, weights=weights, k=1)[0]

    @property
    def lean(self) -> bool:
        return self.mode in ("lean", "small")

    # What the agent does in one step: (tool kind, output text, extra info).
    def _tool_step(self) -> dict:
        r = self.rng
        c = self.corpus
        lean = self.lean
        mode = self.mode
        if mode in _KINDS:  # the shapes: the kinds of step in other proportions
            kinds, weights = zip(*_KINDS[mode])
            kind = r.choices(kinds, weights=weights, k=1)[0]
            if self.profile == "real" and r.random() < 0.002:
                kind = "huge"
            k = {"read": 0.0, "bash": 0.5, "grep": 0.75, "edit": 0.9, "write": 0.99}.get(kind, -1.0)
            if kind == "image":
                img = self._image_step()
                if self.agent == "claude":
                    return img
                return {"kind": "bash", "command": f"base64 {img['path']}", "output": img["data"]}
            if kind == "huge":
                return self._huge_step()
        else:
            k = r.random()
        if k < 0.42:
            path = self.project.pick()
            big = self.profile in _BIG_FILES
            out = self.project.numbered(path, 40 if lean else 2000, arrow=big)
            raw = "\n".join(self.project.files[path][:40]) + "\n" if lean else self.project.content(path)
            return {"kind": "read", "path": path, "output": out, "raw": raw}
        if k < 0.70:
            cmd = r.choice(("pytest -q", "git diff", "ls -la src", "make build", "git log --oneline -20",
                            "python -m mypy src", "cat setup.cfg", "npm test"))
            if mode == "outputs":  # a build log, a test run, an MCP tool's dump: 16 KB to 4 MB
                size = min(int(r.lognormvariate(11.0, 1.1)), 4 << 20)
            else:
                size = int(r.lognormvariate(5.5 if lean else 8.6, 1.0))
                size = min(size, 800 if lean else 120_000)
            out = c.unique_log(size) if r.random() < 0.35 else c.text_of_size(c.logs, size)
            return {"kind": "bash", "command": cmd, "output": out}
        if k < 0.82:
            word = r.choice(_WORDS)
            out = self.project.grep(word, 6 if lean else r.randint(20, 250))
            return {"kind": "grep", "pattern": word, "output": out or "No matches found"}
        if k < 0.95:
            path = self.project.pick()
            original = "" if lean else self.project.content(path)
            old, new, first = self.project.edit(path)
            return {"kind": "edit", "path": path, "old": old, "new": new, "first": first, "original": original,
                    "output": f"The file {path} has been updated successfully."}
        path = f"{self.cwd}/notes/{_ident(r)}.md"
        content = c.paragraph(r.randint(3, 40))
        return {"kind": "write", "path": path, "content": content,
                "output": f"File created successfully at: {path}"}

    def _image_step(self) -> dict:
        """A screenshot read: random bytes as base64 (nothing to compress); one in three
        is one shown before, byte for byte."""
        r = self.rng
        if self.images and r.random() < 0.33:
            data = r.choice(self.images)
        else:
            data = _b64(r, min(int(r.lognormvariate(11.5, 0.8)), 1 << 20))
            self.images.append(data)
            del self.images[:-12]
        path = f"{self.cwd}/screenshots/{_ident(r)}.png"
        return {"kind": "image", "path": path, "data": data, "output": f"[image {path}]"}

    def _huge_step(self) -> dict:
        """One enormous output (a dump, a minified bundle): 4 to 12 MB of barely
        repeating log, stored twice in a Claude record as every Bash output is."""
        r = self.rng
        out = self.corpus.unique_log(r.randint(4 << 20, 12 << 20))
        return {"kind": "bash", "command": "cat build/bundle.log", "output": out}

    def steps_in_prompt(self) -> int:
        if self.mode == "small":
            return self.rng.randint(6, 30)
        return self.rng.randint(2, 14)

    # Subclasses: header(), prompt_cycle(), continuation hooks.
    def run(self, sink: _Sink, *, header: bool = True) -> None:
        self.sink = sink
        try:
            if header:
                self.header()
            while True:
                self.prompt_cycle()
                if sink.size_reached() or sink.turn_limit():
                    break
        except _Stop:
            pass

    def emit(self, rec: dict, *, turn: bool = False, call: bool = False) -> None:
        assert self.sink is not None
        if turn and self.sink.turn_limit():
            raise _Stop
        self.sink.put(rec, turn=turn, call=call)

    def header(self) -> None:
        raise NotImplementedError

    def prompt_cycle(self) -> None:
        raise NotImplementedError


# ------------------------------------------------------------------------------ Claude


class ClaudeSession(_Base):
    agent = "claude"
    VERSION = "2.1.328"
    MODEL = "claude-opus-5-5"

    def __init__(self, seed: int, *, parent_uuid: str | None = None, **kw) -> None:
        super().__init__(seed, **kw)
        self.parent = parent_uuid
        self.prompt_id = _uuid4(self.rng)

    def env(self) -> dict:
        return {"userType": "external", "entrypoint": "cli", "cwd": self.cwd, "sessionId": self.session_id,
                "version": self.VERSION, "gitBranch": "main"}

    def chained(self, body: dict, *, turn: bool, call: bool = False) -> str:
        u = _uuid4(self.rng)
        rec = {"parentUuid": self.parent, "isSidechain": False, **body, "uuid": u, "timestamp": self.tick(), **self.env()}
        self.emit(rec, turn=turn, call=call)
        self.parent = u
        if self.sink is not None:
            self.sink.stats.last_uuid = u
        return u

    def meta(self, rec: dict) -> None:
        self.emit(rec)

    def attachment(self, att: dict, rendered: str | None, role: str = "system") -> None:
        body: dict = {"attachment": att, "type": "attachment"}
        rec_extra = {}
        if rendered is not None:
            rec_extra = {"rendered": [{"content": f"<system-reminder>\n{rendered}\n</system-reminder>"}], "renderedRole": role}
        u = _uuid4(self.rng)
        rec = {"parentUuid": self.parent, "isSidechain": False, **body, "uuid": u, "timestamp": self.tick(1, 3),
               **rec_extra, **self.env()}
        self.emit(rec)
        self.parent = u
        if self.sink is not None:
            self.sink.stats.last_uuid = u

    def usage(self) -> dict:
        r = self.rng
        return {"input_tokens": r.randint(3, 4000), "cache_creation_input_tokens": r.randint(0, 20000),
                "cache_read_input_tokens": r.randint(0, 180000), "output_tokens": r.randint(10, 3000),
                "service_tier": "standard",
                "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": r.randint(0, 9000)}}

    def assistant(self, msg_id: str, block: dict, stop: str | None, *, call: bool = False) -> str:
        body = {
            "message": {"id": msg_id, "type": "message", "role": "assistant", "model": self.MODEL, "content": [block],
                        "stop_reason": stop, "stop_sequence": None, "usage": self.usage()},
            "requestId": f"req_{self.rng.getrandbits(96):024x}",
            "type": "assistant",
        }
        return self.chained(body, turn=True, call=call)

    def header(self) -> None:
        r = self.rng
        t = self.tick()
        self.meta({"type": "permission-mode", "permissionMode": "default", "sessionId": self.session_id})
        self.meta({"type": "api-request-shape", "sessionId": self.session_id,
                   "shapeHash": hashlib.sha256(self.system_prompt.encode()).hexdigest(), "timestamp": t,
                   "version": self.VERSION,
                   "shape": {"system": [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
                                        {"type": "text", "text": self.system_prompt}],
                             "tools": self.tool_schema}})
        del r

    def prompt_cycle(self) -> None:
        self.next_mode()
        r = self.rng
        c = self.corpus
        lean = self.lean
        prompt = c.paragraph(r.randint(1, 6))
        content: object = prompt
        if self.mode == "images" and r.random() < 0.5:  # a screenshot pasted into the prompt
            content = [{"type": "text", "text": prompt}, {"type": "image", "source": {
                "type": "base64", "media_type": "image/png", "data": self._image_step()["data"]}}]
        t = self.tick(20_000, 600_000)
        self.meta({"type": "queue-operation", "operation": "enqueue", "timestamp": t, "sessionId": self.session_id,
                   "content": prompt})
        self.meta({"type": "queue-operation", "operation": "dequeue", "timestamp": self.tick(1, 5),
                   "sessionId": self.session_id})
        self.prompt_id = _uuid4(r)
        prompt_uuid = self.chained({"promptId": self.prompt_id, "type": "user",
                                    "message": {"role": "user", "content": content},
                                    "permissionMode": "default"}, turn=True)
        # Context injected with every prompt: the same long snapshot each time.
        if not lean or r.random() < 0.2:
            self.attachment({"type": "prompt_snapshot", "systemPrompt": [self.system_prompt],
                             "reminderFold": False, "contextRendering": "announced"}, None)
        self.attachment({"type": "date", "date": _iso(self.now)[:10]}, f"Today's date is {_iso(self.now)[:10]}.")
        if not lean and r.random() < 0.3:
            path = self.project.pick()
            snippet = self.project.numbered(path, 120)
            self.attachment({"type": "edited_text_file", "filename": path, "snippet": snippet},
                            f"Note: {path} was modified, either by the user or by a linter.\n{snippet}", "user")
        self.meta({"type": "file-history-snapshot", "messageId": prompt_uuid,
                   "snapshot": {"messageId": prompt_uuid, "trackedFileBackups": {
                       p: {"backupFileName": f"{r.getrandbits(64):016x}@v{r.randint(1, 9)}", "version": r.randint(1, 9),
                           "backupTime": _iso(self.now)} for p in r.sample(self.project.paths, 3)},
                       "timestamp": _iso(self.now)}, "isSnapshotUpdate": False})
        for _ in range(self.steps_in_prompt()):
            self.step()
        msg_id = f"msg_{r.getrandbits(96):024x}"
        self.assistant(msg_id, {"type": "text", "text": c.paragraph(r.randint(1, 3) if lean else r.randint(2, 12))},
                       "end_turn")
        self.meta({"type": "last-prompt", "lastPrompt": prompt[:200], "leafUuid": self.parent, "sessionId": self.session_id})
        self.chained({"type": "system", "subtype": "turn_duration", "durationMs": r.randint(2000, 900000),
                      "isMeta": False}, turn=False)

    def step(self) -> None:
        r = self.rng
        c = self.corpus
        msg_id = f"msg_{r.getrandbits(96):024x}"
        if r.random() < 0.7:
            thinking = c.paragraph(r.randint(1, 3) if self.lean else r.randint(2, 25))
            self.assistant(msg_id, {"type": "thinking", "thinking": thinking,
                                    "signature": _b64(r, r.randint(100, 300) if self.lean else r.randint(200, 700))},
                           None)
        if r.random() < 0.4:
            self.assistant(msg_id, {"type": "text", "text": c.paragraph(r.randint(1, 3))}, None)
        # Parallel tool calls: Claude Code 2.1.x writes each tool_use block of the one
        # message as a record of its own, then each result as a record of its own.
        n = r.randint(2, 6) if self.mode == "parallel" else 1
        calls = []
        for _ in range(n):
            s = self._tool_step()
            call_id = f"toolu_{r.getrandbits(96):024x}"
            name, inp, result, content = self._claude_call(s)
            call_uuid = self.assistant(msg_id, {"type": "tool_use", "id": call_id, "name": name, "input": inp},
                                       "tool_use", call=True)
            calls.append((call_id, call_uuid, result, content))
        if n > 1:
            # ... and each result under its own call's line, in the order the tools finish:
            # the next line of the conversation follows the last result written (a genuine
            # 2.1.x session, tests/fixtures/claude/generated/structures/parallel, has this shape).
            r.shuffle(calls)
        for call_id, call_uuid, result, content in calls:
            if n > 1:
                self.parent = call_uuid
            self.chained({"promptId": self.prompt_id, "type": "user",
                          "message": {"role": "user", "content": [{"tool_use_id": call_id, "type": "tool_result",
                                                                   "content": content, "is_error": False}]},
                          "toolUseResult": result, "sourceToolAssistantUUID": call_uuid}, turn=True)

    def _claude_call(self, s: dict) -> tuple[str, dict, dict, object]:
        """A step as Claude Code records it: the tool's name and input, its
        ``toolUseResult`` and the ``tool_result`` content the model saw."""
        kind = s["kind"]
        content: object = s["output"]
        if kind == "read":
            name, inp = "Read", {"file_path": s["path"]}
            result = {"type": "text", "file": {"filePath": s["path"], "content": s["raw"],
                                               "numLines": s["raw"].count("\n"), "startLine": 1,
                                               "totalLines": s["raw"].count("\n")}}
        elif kind == "image":
            name, inp = "Read", {"file_path": s["path"]}
            result = {"type": "image", "file": {"base64": s["data"], "type": "image/png",
                                                "originalSize": len(s["data"]) * 3 // 4}}
            content = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": s["data"]}}]
        elif kind == "bash":
            name, inp = "Bash", {"command": s["command"], "description": f"Run {s['command']}"}
            result = {"stdout": s["output"], "stderr": "", "interrupted": False, "isImage": False,
                      "noOutputExpected": False}
        elif kind == "grep":
            name, inp = "Grep", {"pattern": s["pattern"], "path": self.cwd, "output_mode": "content", "-n": True}
            result = {"mode": "content", "numFiles": s["output"].count("\n") + 1, "filenames": [],
                      "content": s["output"], "numLines": s["output"].count("\n") + 1}
        elif kind == "edit":
            name, inp = "Edit", {"file_path": s["path"], "old_string": s["old"], "new_string": s["new"],
                                 "replace_all": False}
            result = {"filePath": s["path"], "oldString": s["old"], "newString": s["new"], "originalFile": s["original"],
                      "structuredPatch": [{"oldStart": s["first"], "oldLines": s["old"].count("\n") + 1,
                                           "newStart": s["first"], "newLines": s["new"].count("\n") + 1,
                                           "lines": ["-" + x for x in s["old"].split("\n")] + ["+" + x for x in s["new"].split("\n")]}],
                      "userModified": False, "replaceAll": False}
        else:
            name, inp = "Write", {"file_path": s["path"], "content": s["content"]}
            result = {"type": "create", "filePath": s["path"], "content": s["content"], "structuredPatch": [],
                      "originalFile": None}
        return name, inp, result, content


# ------------------------------------------------------------------------------- Codex


class CodexSession(_Base):
    agent = "codex"
    VERSION = "0.169.0"
    MODEL = "gpt-5.5"

    def line(self, kind: str, payload: dict, *, turn: bool = False, call: bool = False) -> None:
        self.emit({"timestamp": self.tick(1, 900), "type": kind, "payload": payload}, turn=turn, call=call)

    def header(self) -> None:
        self.line("session_meta", {"id": self.session_id, "timestamp": _iso(self.now), "cwd": self.cwd,
                                   "originator": "codex_cli_rs", "cli_version": self.VERSION, "source": "cli",
                                   "model_provider": "openai", "base_instructions": {"text": self.system_prompt},
                                   "git": {"commit_hash": f"{self.rng.getrandbits(160):040x}", "branch": "main"}})
        skills = "\n".join(f"- {t['name']}: {t['description']}" for t in self.tool_schema)
        self.line("response_item", {"type": "message", "role": "developer",
                                    "content": [{"type": "input_text", "text": f"<permissions instructions>\n{self.corpus.paragraph(20)}\n</permissions instructions>"},
                                                {"type": "input_text", "text": f"<skills_instructions>\n{skills}\n</skills_instructions>"}]})

    def prompt_cycle(self) -> None:
        r = self.rng
        c = self.corpus
        self.next_mode()
        lean = self.lean
        self.now += r.randint(20_000, 600_000)
        turn_id = _uuid4(r)
        prompt = c.paragraph(r.randint(1, 6))
        self.line("event_msg", {"type": "task_started", "turn_id": turn_id, "model_context_window": 258400,
                                "collaboration_mode_kind": "default"})
        self.line("turn_context", {"turn_id": turn_id, "cwd": self.cwd, "approval_policy": "on-request",
                                   "sandbox_policy": {"type": "workspace-write", "writable_roots": [self.cwd],
                                                      "network_access": False},
                                   "model": self.MODEL, "effort": "medium", "summary": "auto"})
        if not lean:
            self.line("world_state", {"full": True, "state": {"agents_md": {"directory": self.cwd, "text": self.system_prompt[:6000]},
                                                              "environments": {"cwd": self.cwd, "shell": "bash"}}})
        self.line("response_item", {"type": "message", "role": "user",
                                    "content": [{"type": "input_text", "text": prompt}]}, turn=True)
        self.line("event_msg", {"type": "user_message", "message": prompt, "images": None, "local_images": [],
                                "text_elements": []})
        for _ in range(self.steps_in_prompt()):
            self.step()
        answer = c.paragraph(r.randint(2, 12))
        self.line("response_item", {"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": answer}]}, turn=True)
        self.line("event_msg", {"type": "agent_message", "message": answer})
        self.line("event_msg", {"type": "task_complete", "turn_id": turn_id, "last_agent_message": answer})

    def step(self) -> None:
        r = self.rng
        c = self.corpus
        if r.random() < 0.7:
            summary = c.paragraph(r.randint(1, 4))
            self.line("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": summary}],
                                        "content": None, "encrypted_content": _b64(r, r.randint(600, 3000))}, turn=True)
            self.line("event_msg", {"type": "agent_reasoning", "text": summary})
        s = self._tool_step()
        call_id = f"call_{r.getrandbits(96):024x}"
        kind = s["kind"]
        if kind == "edit" or kind == "write":
            if kind == "edit":
                rel = os.path.relpath(s["path"], self.cwd)
                patch = "*** Begin Patch\n*** Update File: " + rel + "\n@@\n" + "\n".join(
                    ["-" + x for x in s["old"].split("\n")] + ["+" + x for x in s["new"].split("\n")]) + "\n*** End Patch\n"
            else:
                rel = os.path.relpath(s["path"], self.cwd)
                patch = "*** Begin Patch\n*** Add File: " + rel + "\n" + "\n".join(
                    "+" + x for x in s["content"].split("\n")) + "\n*** End Patch\n"
            self.line("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": call_id,
                                        "name": "apply_patch", "input": patch}, turn=True, call=True)
            self.line("response_item", {"type": "custom_tool_call_output", "call_id": call_id,
                                        "output": f"Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM {rel}\n"},
                      turn=True)
        else:
            if kind == "read":
                cmd = f"sed -n '1,2000p' {os.path.relpath(s['path'], self.cwd)}"
                out = s["raw"]
            elif kind == "grep":
                cmd = f"rg -n {s['pattern']} src"
                out = s["output"]
            else:
                cmd = s["command"]
                out = s["output"]
            args = json.dumps({"cmd": cmd, "workdir": self.cwd}, ensure_ascii=False)
            self.line("response_item", {"type": "function_call", "name": "exec_command", "arguments": args,
                                        "call_id": call_id}, turn=True, call=True)
            body = (f"Chunk ID: {r.getrandbits(24):06x}\nWall time: {r.random():.4f} seconds\nProcess exited with code 0\n"
                    f"Original token count: {len(out) // 4}\nOutput:\n{out}")
            self.line("response_item", {"type": "function_call_output", "call_id": call_id, "output": body}, turn=True)
        self.line("event_msg", {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": r.randint(1000, 200000), "cached_input_tokens": r.randint(0, 150000),
                                  "output_tokens": r.randint(10, 5000), "reasoning_output_tokens": r.randint(0, 3000),
                                  "total_tokens": r.randint(1000, 200000)},
            "model_context_window": 258400}, "rate_limits": None})


# ------------------------------------------------------------------------------ Gemini


class GeminiSession(_Base):
    agent = "gemini"
    MODEL = "gemini-3.8-pro"
    NAMES = {"read": "read_file", "bash": "run_shell_command", "grep": "search_file_content", "edit": "replace",
             "write": "write_file"}

    def set_updated(self) -> None:
        self.emit({"$set": {"lastUpdated": _iso(self.now)}})

    def header(self) -> None:
        phash = hashlib.sha256(self.cwd.encode()).hexdigest()
        t = _iso(self.now)
        self.emit({"sessionId": self.session_id, "projectHash": phash, "startTime": t, "lastUpdated": t, "kind": "main"})
        listing = "\n".join(f"├───{os.path.relpath(p, self.cwd)}" for p in self.project.paths)
        context = (f"<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
                   f"{self.system_prompt}\n- **Directory Structure:**\n\n{self.cwd}/\n{listing}\n</session_context>")
        self.emit({"$set": {"messages": [{"id": hashlib.md5(context.encode()).hexdigest(), "timestamp": t,
                                          "type": "user", "content": [{"text": context}]}], "lastUpdated": t}})

    def prompt_cycle(self) -> None:
        r = self.rng
        c = self.corpus
        self.next_mode()
        self.now += r.randint(20_000, 600_000)
        prompt = c.paragraph(r.randint(1, 6))
        self.emit({"id": _uuid4(r), "timestamp": self.tick(), "type": "user", "content": [{"text": prompt}]}, turn=True)
        self.set_updated()
        for _ in range(self.steps_in_prompt()):
            self.step()
        self.emit({"id": _uuid4(r), "timestamp": self.tick(), "type": "gemini", "content": c.paragraph(r.randint(2, 12)),
                   "thoughts": [], "tokens": self.tokens(), "model": self.MODEL}, turn=True)
        self.set_updated()

    def tokens(self) -> dict:
        r = self.rng
        return {"input": r.randint(1000, 200000), "output": r.randint(10, 4000), "cached": r.randint(0, 150000),
                "thoughts": r.randint(0, 3000), "tool": 0, "total": r.randint(1000, 200000)}

    def step(self) -> None:
        r = self.rng
        c = self.corpus
        mid = _uuid4(r)
        t = self.tick()
        thoughts = []
        if r.random() < 0.7:
            thoughts = [{"subject": c.paragraph(1)[:60], "description": c.paragraph(r.randint(1, 8)), "timestamp": t}]
        text = c.paragraph(1) if r.random() < 0.5 else ""
        base = {"id": mid, "timestamp": t, "type": "gemini", "content": text, "thoughts": thoughts,
                "tokens": self.tokens(), "model": self.MODEL}
        self.emit(base, turn=True)
        self.set_updated()
        s = self._tool_step()
        name = self.NAMES[s["kind"]]
        call_id = f"{name}__{name}_{self.now}_{r.randrange(10)}"
        if s["kind"] == "read":
            args = {"file_path": s["path"]}
            out = s["raw"]
        elif s["kind"] == "bash":
            args = {"command": s["command"], "description": f"Run {s['command']}"}
            out = f"<untrusted_context>\nOutput: {s['output']}\nProcess Group PGID: {r.randint(1000, 99999)}\n</untrusted_context>"
        elif s["kind"] == "grep":
            args = {"pattern": s["pattern"], "dir_path": self.cwd}
            out = s["output"]
        elif s["kind"] == "edit":
            args = {"file_path": s["path"], "old_string": s["old"], "new_string": s["new"], "instruction": c.paragraph(1)}
            out = f"Successfully modified file: {s['path']} (1 replacements)."
        else:
            args = {"file_path": s["path"], "content": s["content"]}
            out = f"Successfully created and wrote to new file: {s['path']}."
        response = [{"functionResponse": {"id": call_id, "name": name, "response": {"output": out}}}]
        display = s["output"] if s["kind"] in ("bash", "grep") else ""
        full = dict(base)
        full["toolCalls"] = [{"id": call_id, "name": name, "args": args, "result": response, "status": "success",
                              "timestamp": self.tick(), "resultDisplay": display,
                              "description": s.get("path", s.get("command", "")), "displayName": name,
                              "renderOutputAsMarkdown": s["kind"] == "read"}]
        self.emit(full, call=True)
        self.emit({"id": _uuid4(r), "timestamp": self.tick(), "type": "user", "content": response}, turn=True)
        self.set_updated()


_CLASSES: dict[str, Callable[..., _Base]] = {"claude": ClaudeSession, "codex": CodexSession, "gemini": GeminiSession}


def default_name(agent: str, session_id: str) -> str:
    if agent == "claude":
        return f"{session_id}.jsonl"
    if agent == "codex":
        return f"rollout-2026-09-21T10-00-00-{session_id}.jsonl"
    return f"session-2026-09-21T10-00-{session_id[:8]}.jsonl"


def session_id_for(agent: str, seed: int) -> str:
    """The session id a generator with this seed uses (its file name needs it first)."""
    rng = random.Random(f"sid-{agent}-{seed}")
    return _uuid4(rng)


def generate(agent: str, path: str, *, size: int | None = None, turns: int | None = None, seed: int = 1,
             profile: str = "realistic", marks: tuple[int, ...] = (), session_id: str | None = None,
             cwd: str | None = None) -> Stats:
    """Write a session of about ``size`` bytes (ending after a whole prompt cycle), or of
    exactly ``turns`` turns; returns what was written. Deterministic in all arguments."""
    if size is None and turns is None:
        raise ValueError("give a size or a number of turns")
    gen = _CLASSES[agent](seed, profile=profile, session_id=session_id or session_id_for(agent, seed), cwd=cwd)
    stats = Stats(agent, path, session_id=gen.session_id, cwd=gen.cwd)
    tmp = path + ".part"
    with open(tmp, "wb", buffering=1 << 20) as fh:
        gen.run(_Sink(fh, stats, size, turns, set(marks)))
    os.replace(tmp, path)
    return stats


def continue_claude(path: str, *, turns: int, seed: int, session_id: str, parent_uuid: str | None, cwd: str,
                    start_ms: int = 1_800_000_000_000) -> Stats:
    """Append ``turns`` new turns to a Claude session (a fork's own continuation)."""
    gen = ClaudeSession(seed, session_id=session_id, cwd=cwd, parent_uuid=parent_uuid, start_ms=start_ms)
    stats = Stats("claude", path, session_id=session_id, cwd=cwd)
    with open(path, "ab") as fh:
        gen.run(_Sink(fh, stats, None, turns, set()), header=False)
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.generate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", choices=AGENTS, default="claude")
    ap.add_argument("--size", help="about this many bytes (50M, 1G ...)")
    ap.add_argument("--turns", type=int, help="exactly this many turns")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", choices=PROFILES, default="realistic",
                    help="the session's shape: lean (short outputs, many turns in few bytes), reads, outputs, "
                         "edits, images, small, huge, parallel, or real (all of them, prompt by prompt)")
    ap.add_argument("--out", help="file to write (default: the agent's own file name in the current folder)")
    args = ap.parse_args(argv)
    if not args.size and not args.turns:
        ap.error("give --size or --turns")
    out = args.out or default_name(args.agent, session_id_for(args.agent, args.seed))
    st = generate(args.agent, out, size=parse_size(args.size) if args.size else None, turns=args.turns,
                  seed=args.seed, profile=args.profile)
    json.dump(st.to_json(), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
