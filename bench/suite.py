"""The benchmarks of issue 7: each a ratio against a baseline measured in the same run.

    python -m bench                      # full run: sizes 1, 50 and 250 MB, 3 runs each
    python -m bench --quick              # tiny sizes, one run: a smoke test (CI)
    python -m bench --only import,read   # some benchmarks only
    python -m bench --out results.json   # also write the rows as JSON

Every opal command is timed as a whole process (``python -m opalgit ...`` from this
working tree, spawn to reap, ``time.perf_counter``), the median of ``--runs`` runs.
The child's CPU time (user + system, from ``wait4``) is recorded beside it, because on
a shared machine wall time also measures the neighbours.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

from . import generate as gen
from .util import (
    ROOT,
    Proc,
    Row,
    hermetic_env,
    isolated_python,
    machine,
    markdown,
    median,
    objects_bytes,
    run,
    run_measured,
    table,
)

MB = 1 << 20
BENCHMARKS = ("import", "incremental", "storage", "export", "read", "memory", "hooks", "peers", "handoff", "grep",
              "capture", "blame", "web")
#: Rows every run produces (whatever --sizes), in this order; --quick included.
ROW_IDS = (
    "import", "incremental", "storage.single", "storage.grow20", "storage.naive", "storage.forks.same",
    "storage.forks.export", "export.claude", "export.codex", "export.gemini", "read.log", "read.show",
    "read.diff", "read.status", "read.branch", "memory", "hooks", "peers.time", "peers.tool_calls", "peers.handoff",
    "grep", "grep.all", "capture", "blame", "web.state", "web.graph",
)
_BENCH_OF_ROW = {r: r.split(".")[0] for r in ROW_IDS}
_BENCH_OF_ROW["peers.handoff"] = "handoff"  # a benchmark of its own (bench/handoff.py), a row among the peers
#: The Claude session shapes the memory benchmark imports besides the bench's own
#: (bench/generate.py's profiles), each held to the memory target: row memory.<shape>.
MEMORY_SHAPES = {
    "real": "the large real-shaped session: every shape below, prompt by prompt",
    "reads": "sixty files read again and again, each read stored twice",
    "outputs": "tool outputs of 16 KB to 4 MB",
    "edits": "edits of large files carrying originalFile",
    "images": "screenshots as base64, some shown again",
    "small": "many small turns",
    "huge": "a few outputs of 4 to 12 MB, each stored twice",
    "parallel": "parallel tool calls, one content block per line",
}

ORJSON_PARSE = """
import sys
try:
    import orjson
    loads = orjson.loads
except ImportError:  # the bench says so in the row
    import json
    loads = json.loads
n = 0
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        if line.strip():
            loads(line)
            n += 1
print(n)
"""


@dataclass
class Config:
    quick: bool = False
    runs: int = 3
    sizes: list[int] = field(default_factory=lambda: [1 * MB, 50 * MB, 250 * MB])
    inc_turns: int = 10_000
    inc_new: int = 10
    read_turns: int = 100_000
    read_commits: int = 25
    grow_commits: int = 20
    forks: int = 10
    fork_turns: int = 10
    floor_runs: int = 7
    web_commits: int = 1_000  # the web.graph row's history
    only: set[str] | None = None
    shapes: set[str] | None = None  # the memory rows' session shapes (None: all)

    @property
    def main_size(self) -> int:
        """The size the targets are judged at (50 MB): the largest below the memory size."""
        s = sorted(self.sizes)
        return s[-2] if len(s) > 1 else s[-1]

    @property
    def memory_size(self) -> int:
        return max(self.sizes)

    @property
    def import_sizes(self) -> list[int]:
        s = sorted(self.sizes)
        return s[:-1] if len(s) > 1 else s

    @staticmethod
    def quick_config() -> "Config":
        return Config(quick=True, runs=1, sizes=[256 * 1024, 1 * MB, 2 * MB], inc_turns=300, read_turns=2_000,
                      read_commits=4, grow_commits=5, forks=2, floor_runs=2, web_commits=40)


def size_label(n: int) -> str:
    return f"{n / MB:.3g} MB" if n >= MB else f"{n / 1024:.3g} KB"


class Bench:
    def __init__(self, cfg: Config, workdir: str) -> None:
        self.cfg = cfg
        self.work = workdir
        self.home = os.path.join(workdir, "home")
        self.rows: dict[str, Row] = {}
        self.extra_rows: list[Row] = []
        self.import_wall: dict[int, float] = {}
        self.import_repo: dict[int, str] = {}
        self.single_growth: dict[int, int] = {}
        self.log = lambda s: print(s, file=sys.stderr, flush=True)
        self._n = 0
        # Repositories never outlive a run; generated sessions are reused (--workdir).
        shutil.rmtree(os.path.join(workdir, "repos"), ignore_errors=True)
        for scratch in ("incremental", "grow", "forks", "read", "storage", "warmup", "peers-home", "home"):
            shutil.rmtree(os.path.join(workdir, scratch), ignore_errors=True)
        self.env = hermetic_env(self.home)
        # The rows measured through the command server (docs/server.md), which is
        # opt-in: started explicitly before they run ('opal server start'), used by the
        # commands of this environment (no OPAL_SERVER setting, as a user's), and stopped
        # at the end. self.env's OPAL_SERVER=off is the default path of a user who
        # never started one (commands start none either way).
        self.served_env = {k: v for k, v in self.env.items() if k != "OPAL_SERVER"}
        self.served_env["OPAL_SERVER_IDLE"] = "1800"
        self.server_pid: int | None = None
        self.servers_started: list[int] = []
        # Kept across runs, like the generated sessions (the venv holds no copy of opal).
        self.python, self.opal_cmd, self.python_note = isolated_python(os.path.join(workdir, "python"))

    # ----------------------------------------------------------------- helpers

    def opal(self, *args: str, cwd: str, env: dict | None = None) -> Proc:
        return run([*self.opal_cmd, *args], cwd=cwd, env=env or self.env)

    def git(self, *args: str, cwd: str, env: dict | None = None) -> Proc:
        return run(["git", *args], cwd=cwd, env=env or self.env)

    def path(self, *parts: str) -> str:
        p = os.path.join(self.work, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def fresh_repo(self, name: str, *, opal: bool = True) -> str:
        self._n += 1
        repo = os.path.join(self.work, "repos", f"{self._n:03d}-{name}")
        os.makedirs(repo)
        self.git("init", "-q", cwd=repo).check()
        if opal:
            self.opal("init", cwd=repo).check()
        return repo

    def session(self, agent: str, *, size: int | None = None, turns: int | None = None, seed: int = 1,
                profile: str = "realistic", marks: tuple[int, ...] = ()) -> gen.Stats:
        """A generated session (cached in the work folder by its parameters)."""
        key = f"{agent}-{size or 0}-{turns or 0}-{seed}-{profile}-{'_'.join(map(str, marks))}"
        folder = os.path.join(self.work, "sessions", key)
        meta = os.path.join(folder, "stats.json")
        if os.path.exists(meta):
            with open(meta) as fh:
                d = json.load(fh)
            d["marks"] = {int(k): v for k, v in d["marks"].items()}
            return gen.Stats(**d)
        os.makedirs(folder, exist_ok=True)
        sid = gen.session_id_for(agent, seed)
        path = os.path.join(folder, gen.default_name(agent, sid))
        t = time.perf_counter()
        st = gen.generate(agent, path, size=size, turns=turns, seed=seed, profile=profile, marks=marks)
        self.log(f"  generated {agent} session: {st.bytes / MB:.1f} MB, {st.turns} turns, "
                 f"{st.tool_calls} tool calls ({time.perf_counter() - t:.1f} s)")
        with open(meta, "w") as fh:
            json.dump(st.to_json(), fh)
        return st

    def row(self, r: Row) -> Row:
        r.judge()
        if r.id in ROW_IDS:
            self.rows[r.id] = r
        else:
            self.extra_rows.append(r)
        self.log(f"  {r.id}: {r.status} {'' if r.ratio is None else f'ratio {r.ratio:.3g}'} {r.note[:100]}")
        return r

    def na(self, rid: str, title: str, note: str) -> Row:
        return self.row(Row(rid, title, status="n/a", note=note))

    def warm_up(self) -> None:
        """Compile and cache every module the timed commands load (nothing here is timed)."""
        run([self.python, "-m", "compileall", "-q", os.path.join(ROOT, "opalgit")], env=self.env)
        path = self.path("warmup", gen.default_name("claude", gen.session_id_for("claude", 99)))
        gen.generate("claude", path, size=64 * 1024, seed=99)
        repo = self.fresh_repo("warmup")
        self.opal("commit", "--file", path, cwd=repo).check()
        self.opal("branch", "side", "main:2", cwd=repo).check()
        for args in (["log", "-n", "2"], ["show", "main:1"], ["diff", "main", "side"], ["--version"], ["status"]):
            self.opal(*args, cwd=repo)
        for agent in ("claude", "codex", "gemini"):
            self.opal("export", "--to", agent, "--json", "--dry-run", cwd=repo)
        run([self.python, "-c", ORJSON_PARSE, path], env=self.env)
        shutil.rmtree(repo)

    # ------------------------------------------------------------------ 1 import

    def bench_import(self) -> None:
        cfg = self.cfg
        for size in cfg.import_sizes:
            st = self.session("claude", size=size)
            walls, cpus, rss, growth = [], [], [], []
            bw, bc = [], []
            repo = ""
            # The import and the baseline take turns, so that a change in the machine's
            # speed during the run (seen at 2x within minutes on shared hosts) weighs on
            # both alike instead of on whichever ran in the slow minutes.
            for i in range(cfg.runs):
                if repo:
                    shutil.rmtree(repo)
                repo = self.fresh_repo(f"import-{size}")
                before = objects_bytes(repo)
                p = self.opal("commit", "--file", st.path, "--json", cwd=repo).check()
                growth.append(objects_bytes(repo) - before)
                walls.append(p.wall)
                cpus.append(p.cpu)
                rss.append(p.maxrss)
                b = run([self.python, "-c", ORJSON_PARSE, st.path], env=self.env).check()
                bw.append(b.wall)
                bc.append(b.cpu)
            res = json.loads(p.out)
            self.import_repo[size] = repo
            self.import_wall[size] = median(walls)
            self.single_growth[size] = int(median(growth))
            try:
                import orjson  # noqa: F401

                parser = "orjson"
            except ImportError:
                parser = "json (orjson is not installed)"
            rid = "import" if size == cfg.main_size else f"import@{size_label(size)}"
            self.row(Row(
                rid, f"opal commit --file, {size_label(st.bytes)} Claude session, fresh repo", median(walls), "s",
                median(bw), f"{parser} line by line", target=5.0 if size == cfg.main_size else None,
                note=f"{res['turns']} turns, {res['records']} records; cpu ratio {median(cpus) / median(bc):.1f}x; "
                     f"peak RSS {median(rss) / MB:.0f} MB",
                extra={"runs_wall": walls, "runs_cpu": cpus, "baseline_wall": bw, "baseline_cpu": bc,
                       "cpu_ratio": median(cpus) / median(bc), "peak_rss": median(rss), "file_bytes": st.bytes,
                       "turns": res["turns"], "records": res["records"], "objects_written": res["objects_written"],
                       "growth_bytes": self.single_growth[size]},
            ))

        # The other agents' formats, at the main size (informative: the target is stated for Claude).
        for agent in ("codex", "gemini"):
            st = self.session(agent, size=cfg.main_size)
            walls, cpus = [], []
            failed = ""
            for _ in range(cfg.runs):
                repo = self.fresh_repo(f"import-{agent}")
                p = self.opal("commit", "--file", st.path, "--json", cwd=repo)
                shutil.rmtree(repo)
                if p.rc != 0:
                    failed = (p.err.strip().splitlines() or ["?"])[0][-300:]
                    break
                walls.append(p.wall)
                cpus.append(p.cpu)
            if failed:
                self.row(Row(f"import.{agent}", f"opal commit --file, {agent} session", status="error", note=failed))
                continue
            res = json.loads(p.out)
            bw = [run([self.python, "-c", ORJSON_PARSE, st.path], env=self.env).check().wall for _ in range(cfg.runs)]
            self.row(Row(f"import.{agent}", f"opal commit --file, {size_label(st.bytes)} {agent} session", median(walls),
                         "s", median(bw), "orjson line by line",
                         note=f"{res['turns']} turns, {res['records']} records; cpu {median(cpus):.2f} s",
                         extra={"runs_wall": walls, "runs_cpu": cpus, "baseline_wall": bw}))

    def _ensure_import(self, size: int) -> str:
        if size not in self.import_repo:
            st = self.session("claude", size=size)
            repo = self.fresh_repo(f"import-{size}")
            before = objects_bytes(repo)
            p = self.opal("commit", "--file", st.path, "--json", cwd=repo).check()
            self.single_growth[size] = objects_bytes(repo) - before
            self.import_repo[size] = repo
            self.import_wall.setdefault(size, p.wall)
        return self.import_repo[size]

    # -------------------------------------------------------------- 2 incremental

    def bench_incremental(self) -> None:
        cfg = self.cfg
        n, k = cfg.inc_turns, cfg.inc_new
        st = self.session("claude", turns=n + k, seed=2, marks=(n,))
        cut = st.marks[n]
        fulls, incs, cold_fulls, cold_incs, fcpu, icpu = [], [], [], [], [], []
        info: dict = {}
        for i in range(cfg.runs):
            # `opal commit` through a command server started explicitly (each command
            # handed to it), and in processes of their own (the default), taking turns.
            p, q = self._import_then_grow(st, cut, "incremental", f"run{i}", env=self.served_env)
            fulls.append(p.wall)
            incs.append(q.wall)
            info = json.loads(q.out)
            p, q = self._import_then_grow(st, cut, "incremental", f"cold{i}")
            cold_fulls.append(p.wall)
            cold_incs.append(q.wall)
            fcpu.append(p.cpu)
            icpu.append(q.cpu)
            full_res = json.loads(p.out)
            cold_info = json.loads(q.out)
        assert cold_info.get("turns") == info.get("turns"), (cold_info, info)
        # The same figure without process start-up (measured here, in the same run):
        # what the commit's own work costs, which is what follows the new turns.
        floor = [self.opal("--version", cwd=self.path("incremental")).check() for _ in range(cfg.floor_runs)]
        fw = median([p.wall for p in floor])
        note = (f"{full_res['turns']} turns ({cut / MB:.0f} MB) + {info.get('new_turns')} new turns; "
                f"incremental={info.get('incremental')}; each command handed to a command server started "
                f"explicitly (opt-in); in processes of their own, the default: {median(cold_incs) * 1000:.0f} ms vs "
                f"{median(cold_fulls):.2f} s (incremental.cold)")
        self.row(Row("incremental", f"opal commit after {k} new turns on a {n:,}-turn session", median(incs), "s",
                     median(fulls), "full import of it", target=0.05, note=note,
                     extra={"runs_wall": incs, "baseline_wall": fulls, "server": True,
                            "incremental": info.get("incremental"), "new_turns": info.get("new_turns"),
                            "objects_written": info.get("objects_written"), "bytes_written": info.get("bytes_written")}))
        self.row(Row("incremental.cold", "the same, each command in a process of its own (the default path)",
                     median(cold_incs), "s", median(cold_fulls), "full import of it, likewise",
                     note=f"informative: start-up included; cpu ratio {median(icpu) / median(fcpu):.3f}x",
                     extra={"runs_wall": cold_incs, "baseline_wall": cold_fulls, "runs_cpu": icpu,
                            "baseline_cpu": fcpu}))
        self.row(Row("incremental.net", f"the same, less process start-up (opal --version, {fw * 1000:.0f} ms)",
                     max(median(cold_incs) - fw, 0.0), "s", max(median(cold_fulls) - fw, 1e-9),
                     "full import less start-up",
                     note="informative: start-up is paid once per process, whatever the session",
                     extra={"floor_wall": [p.wall for p in floor]}))
        # The other agents' formats, one run each (informative: the target is stated for
        # Claude). A Gemini CLI log re-appends a message under its id when its tool
        # results arrive; the adapter reads that as an extension that revises the last
        # record (docs/adapters.md), and this row shows the commit still follows the
        # new turns.
        for agent in ("codex", "gemini"):
            st = self.session(agent, turns=n + k, seed=2, marks=(n,))
            cut = st.marks[n]
            p, q = self._import_then_grow(st, cut, f"incremental-{agent}")
            info = json.loads(q.out)
            self.row(Row(f"incremental.{agent}", f"opal commit after {k} new turns on a {n:,}-turn {agent} session",
                         q.wall, "s", p.wall, "full import of it",
                         note=f"{cut / MB:.0f} MB + {info.get('new_turns')} new turns; "
                              f"incremental={info.get('incremental')}; one run",
                         extra={"incremental": info.get("incremental"), "new_turns": info.get("new_turns")}))

        # Parallel calls the way Claude Code 2.1.x writes them (each result under its own
        # call's line): the incremental read reattaches those sibling results itself; it
        # read the whole file again before (a ratio of about 0.85, the full read itself
        # quadratic in the sibling results: 64 s for 43 MB).
        st = self.session("claude", turns=n + k, seed=2, marks=(n,), profile="parallel")
        cut = st.marks[n]
        p, q = self._import_then_grow(st, cut, "incremental-parallel")
        info = json.loads(q.out)
        self.row(Row("incremental.parallel", f"opal commit after {k} new turns on a {n:,}-turn Claude session of "
                     "parallel calls", q.wall, "s", p.wall, "full import of it",
                     note=f"{cut / MB:.0f} MB + {info.get('new_turns')} new turns; {st.tool_calls} tool calls, 2 to 6 "
                          f"a reply; incremental={info.get('incremental')}; one run",
                     extra={"incremental": info.get("incremental"), "new_turns": info.get("new_turns")}))

    def _import_then_grow(self, st: gen.Stats, cut: int, name: str, run_name: str = "",
                          env: dict | None = None) -> tuple[Proc, Proc]:
        """``opal commit`` of ``st``'s session up to byte ``cut`` in a fresh repository,
        then again once the rest is appended: the full import and the incremental commit."""
        repo = self.fresh_repo(name)
        live = self.path(name, run_name, os.path.basename(st.path))
        _copy_range(st.path, live, 0, cut)
        p = self.opal("commit", "--file", live, "--json", cwd=repo, env=env).check()
        _copy_range(st.path, live, cut, st.bytes, append=True)
        q = self.opal("commit", "--file", live, "--json", cwd=repo, env=env).check()
        shutil.rmtree(repo)
        shutil.rmtree(os.path.dirname(live))
        return p, q

    # ------------------------------------------------------------------ 3 storage

    def bench_storage(self) -> None:
        cfg = self.cfg
        size = cfg.main_size
        st = self.session("claude", size=size)
        self._ensure_import(size)
        single = self.single_growth[size]
        import zstandard

        cctx = zstandard.ZstdCompressor(level=3)
        with open(st.path, "rb") as fh:
            zbytes = 0
            reader = cctx.stream_reader(fh)
            while chunk := reader.read(1 << 20):
                zbytes += len(chunk)
        zbin = None
        if shutil.which("zstd"):
            tmp = self.path("storage", "raw.zst")
            run(["zstd", "-3", "-q", "-f", "-o", tmp, st.path]).check()
            zbin = os.path.getsize(tmp)
            os.unlink(tmp)
        self.row(Row("storage.single", f"repo growth, one commit of the {size_label(st.bytes)} session", single, "B",
                     zbytes, "zstd -3 of the raw file", target=1.0,
                     note=f"zstd binary -3: {zbin} B" if zbin else "zstd binary not installed",
                     extra={"zstd_module_bytes": zbytes, "zstd_binary_bytes": zbin, "file_bytes": st.bytes}))

        # 20 commits while the session grows to that size.
        cuts = _line_cuts(st.path, cfg.grow_commits)
        repo = self.fresh_repo("grow20")
        live = self.path("grow", os.path.basename(st.path))
        before = objects_bytes(repo)
        t = time.perf_counter()
        prev = 0
        for c in cuts:
            _copy_range(st.path, live, prev, c, append=prev > 0)
            prev = c
            self.opal("commit", "--file", live, "--json", cwd=repo).check()
        grow_time = time.perf_counter() - t
        grown = objects_bytes(repo) - before
        self.row(Row("storage.grow20", f"repo growth, {len(cuts)} commits while the session grows to it", grown, "B",
                     single, "one commit of the final state", target=1.1,
                     note=f"{len(cuts)} commits took {grow_time:.1f} s in all"))
        g = self.git("gc", "-q", cwd=repo)
        after_gc = objects_bytes(repo) - before
        self.extra_rows.append(Row("storage.grow20.gc", "the same opal repo after git gc", after_gc, "B", zbytes,
                                   "zstd -3 of the raw file", note="" if g.rc == 0 else g.err[-200:]).judge())

        # The naive way: the session file committed into plain git at each point, then git gc.
        plain = self.fresh_repo("naive", opal=False)
        p0 = objects_bytes(plain)
        target = os.path.join(plain, "session.jsonl")
        prev = 0
        t = time.perf_counter()
        for i, c in enumerate(cuts):
            _copy_range(st.path, target, prev, c, append=prev > 0)
            prev = c
            self.git("add", "session.jsonl", cwd=plain).check()
            self.git("commit", "-q", "-m", f"point {i + 1}", cwd=plain).check()
        before_gc = objects_bytes(plain) - p0
        self.git("gc", "-q", cwd=plain).check()
        naive = objects_bytes(plain) - p0
        naive_time = time.perf_counter() - t
        self.row(Row("storage.naive", f"plain git: the file committed at the same {len(cuts)} points, then git gc",
                     naive, "B", grown, f"opal's {len(cuts)} commits",
                     note=f"{before_gc / MB:.0f} MB before gc; {naive_time:.0f} s; vs zstd -3: {naive / zbytes:.2f}x",
                     extra={"before_gc": before_gc, "vs_zstd": naive / zbytes}))
        shutil.rmtree(plain)
        shutil.rmtree(repo)
        self._forks(st, single)

    def _forks(self, st: gen.Stats, single: int) -> None:
        cfg = self.cfg
        repo = self.fresh_repo("forks")
        p = self.opal("commit", "--file", st.path, "--json", cwd=repo).check()
        turns = json.loads(p.out)["turns"]
        mid = turns // 2
        shown = json.loads(self.opal("show", f"main:{mid}", "--json", cwd=repo).check().out)
        record = shown["record"]  # 1-based line number of the middle turn
        offset, parent = _line_end(st.path, record)
        # (a) Forks that keep the source records: the shared prefix is the same bytes.
        growths = []
        for i in range(cfg.forks):
            self.opal("branch", f"same{i}", f"main:{mid}", cwd=repo).check()
            self.opal("switch", f"same{i}", cwd=repo).check()
            fork = self.path("forks", f"same{i}", os.path.basename(st.path))
            _copy_range(st.path, fork, 0, offset)
            gen.continue_claude(fork, turns=cfg.fork_turns, seed=1000 + i, session_id=st.session_id,
                                parent_uuid=parent, cwd=st.cwd)
            b = objects_bytes(repo)
            self.opal("commit", "--file", fork, "--json", cwd=repo).check()
            growths.append(objects_bytes(repo) - b)
        worst = max(growths)
        self.row(Row("storage.forks.same", f"{cfg.forks} forks at turn {mid} + {cfg.fork_turns} turns each "
                     "(fork file keeps the source records)", worst / single * 100, "%", None,
                     target=1.0, target_on="value",
                     note=f"worst fork {worst / 1024:.0f} KB, mean {sum(growths) / len(growths) / 1024:.0f} KB, "
                          f"of {single / MB:.1f} MB for the whole session",
                     extra={"growth_bytes": growths, "single_bytes": single}))
        # (b) The user's way: branch, export to Claude (a new session id), the agent adds turns, commit.
        growths = []
        for i in range(cfg.forks):
            self.opal("branch", f"fork{i}", f"main:{mid}", cwd=repo).check()
            self.opal("switch", f"fork{i}", cwd=repo).check()
            b = objects_bytes(repo)
            e = self.opal("export", "--to", "claude", "--json", cwd=repo)
            if e.rc != 0:
                if _not_implemented(e):
                    self.na("storage.forks.export", "forks through opal export --to claude",
                            "the Claude export is not implemented yet")
                    return
                e.check()
            out = json.loads(e.out)
            path = out["files"][0]
            last_uuid, cwd = _last_chain(path)
            gen.continue_claude(path, turns=cfg.fork_turns, seed=2000 + i, session_id=out["session_id"],
                                parent_uuid=last_uuid, cwd=cwd or st.cwd)
            c = self.opal("commit", "--json", cwd=repo).check()
            res = json.loads(c.out)
            growths.append(objects_bytes(repo) - b)
        worst = max(growths)
        self.row(Row("storage.forks.export", f"{cfg.forks} forks at turn {mid}: branch, export --to claude, "
                     f"{cfg.fork_turns} turns, commit", worst / single * 100, "%", None, target=1.0,
                     target_on="value",
                     note=f"worst fork {worst / 1024:.0f} KB, mean {sum(growths) / len(growths) / 1024:.0f} KB, of "
                          f"{single / MB:.1f} MB; last commit: {res.get('new_turns')} new turns, "
                          f"continues the export: {any('continues the export' in n for n in res.get('notes', []))}",
                     extra={"growth_bytes": growths, "single_bytes": single}))
        shutil.rmtree(repo)

    # ------------------------------------------------------------------- 4 export

    def bench_export(self) -> None:
        cfg = self.cfg
        for size in cfg.import_sizes:
            repo = self._ensure_import(size)
            st = self.session("claude", size=size)
            for agent in ("claude", "codex", "gemini"):
                rid = f"export.{agent}" if size == cfg.main_size else f"export.{agent}@{size_label(size)}"
                walls, cpus, imports, written = [], [], [], 0
                report: dict = {}
                na = None
                for _ in range(cfg.runs):
                    p = self.opal("export", "--to", agent, "--json", cwd=repo)
                    if p.rc != 0:
                        if _not_implemented(p):
                            na = "not implemented yet (NotImplementedError)"
                            break
                        p.check()
                    walls.append(p.wall)
                    cpus.append(p.cpu)
                    # Each export is paired with an import of the same session, run
                    # right after it (see bench_import on taking turns).
                    other = self.fresh_repo(f"import-for-export-{agent}")
                    imports.append(self.opal("commit", "--file", st.path, "--json", cwd=other).check().wall)
                    shutil.rmtree(other)
                    out = json.loads(p.out)
                    report = out.get("report", {})
                    files = out.get("files", [])
                    written = sum(os.path.getsize(f) for f in files)
                    for f in files:
                        os.unlink(f)
                if na:
                    self.na(rid, f"opal export --to {agent}", na)
                    continue
                dropped = sum(report.get("dropped", {}).values())
                converted = sum(report.get("converted", {}).values())
                self.row(Row(rid, f"opal export --to {agent} of the {size_label(st.bytes)} session", median(walls), "s",
                             median(imports), "its import", target=1.0 if size == cfg.main_size else None,
                             note=f"wrote {written / MB:.1f} MB; {converted} converted, {dropped} dropped; "
                                  f"cpu {median(cpus):.2f} s",
                             extra={"runs_wall": walls, "runs_cpu": cpus, "baseline_wall": imports,
                                    "written_bytes": written, "report": report}))

    # ---------------------------------------------------------------------- 5 read

    def bench_read(self) -> None:
        cfg = self.cfg
        st = self.session("claude", turns=cfg.read_turns, seed=4, profile="lean")
        repo = self.fresh_repo("read")
        live = self.path("read", os.path.basename(st.path))
        t = time.perf_counter()
        prev = 0
        res: dict = {}
        for c in _line_cuts(st.path, cfg.read_commits):
            _copy_range(st.path, live, prev, c, append=prev > 0)
            prev = c
            res = json.loads(self.opal("commit", "--file", live, "--json", cwd=repo).check().out)
        build = time.perf_counter() - t
        turns = res["turns"]
        self.opal("branch", "side", f"main:{turns - 10}", cwd=repo).check()
        cases = [
            ("read.log", "opal log -n 20", ["log", "-n", "20"]),
            ("read.show", f"opal show main:{turns // 2}", ["show", f"main:{turns // 2}"]),
            ("read.diff", "opal diff main side (all but 10 turns shared)", ["diff", "main", "side"]),
            ("read.status", "opal status", ["status"]),
            ("read.branch", "opal branch", ["branch"]),
        ]
        for rid, title, args in cases:
            ps, fs = [], []
            for _ in range(max(cfg.runs, 3 if not cfg.quick else 1)):  # taking turns with the floor
                ps.append(self.opal(*args, cwd=repo).check())
                fs.append(self.opal("--version", cwd=repo).check())
            self.row(Row(rid, f"{title}, {turns:,}-turn history", median([p.wall for p in ps]), "s",
                         median([f.wall for f in fs]), "opal --version", target=3.0,
                         note=f"cpu {median([p.cpu for p in ps]) * 1000:.0f} ms vs "
                              f"{median([f.cpu for f in fs]) * 1000:.0f} ms; {len(ps[0].out)} bytes out",
                         extra={"runs_wall": [p.wall for p in ps], "floor_wall": [f.wall for f in fs],
                                "history_build_s": build, "history_bytes": st.bytes}))
        # The same through the command server (informative: the target is stated against
        # a process's start-up, which the server spares both sides of the ratio).
        for rid, title, args in cases:
            ps, fs = [], []
            for _ in range(max(cfg.runs, 3 if not cfg.quick else 1)):
                ps.append(self.opal(*args, cwd=repo, env=self.served_env).check())
                fs.append(self.opal("--version", cwd=repo, env=self.served_env).check())
            self.row(Row(f"{rid}.served", f"{title}, through the command server", median([p.wall for p in ps]), "s",
                         median([f.wall for f in fs]), "opal --version, likewise",
                         note="informative: each command handed to a running command server",
                         extra={"runs_wall": [p.wall for p in ps], "floor_wall": [f.wall for f in fs]}))
        shutil.rmtree(repo)

    # -------------------------------------------------------------------- 6 memory

    def bench_memory(self) -> None:
        size = self.cfg.memory_size
        # The target is stated for the Claude session; the other agents' formats are
        # informative rows (every adapter reads in two passes). Every shape of Claude
        # session (bench/generate.py's profiles) is held to the same target: the
        # streaming must not depend on what the session does.
        runs = [("memory", "claude", "realistic", ""), ("memory.codex", "codex", "realistic", " codex"),
                ("memory.gemini", "gemini", "realistic", " gemini")]
        runs += [(f"memory.{shape}", "claude", shape, f" {shape}-shaped Claude") for shape in MEMORY_SHAPES
                 if self.cfg.shapes is None or shape in self.cfg.shapes]
        if self.cfg.shapes is not None and "realistic" not in self.cfg.shapes:
            runs = [r for r in runs if r[2] != "realistic"]
        for rid, agent, profile, label in runs:
            st = self.session(agent, size=size, profile=profile)
            repo = self.fresh_repo(rid.replace(".", "-"))
            p = run_measured([*self.opal_cmd, "commit", "--file", st.path, "--json"], cwd=repo, env=self.env).check()
            res = json.loads(p.out)
            self.row(Row(rid, f"peak RSS of opal commit --file, {size_label(st.bytes)}{label} session",
                         p.maxrss, "B", st.bytes, "file size", target=None if agent != "claude" else 0.5,
                         note=f"import took {p.wall:.1f} s (cpu {p.cpu:.1f} s), {res['turns']} turns"
                              f"{'; ' + MEMORY_SHAPES[profile] if profile in MEMORY_SHAPES else ''}",
                         extra={"wall": p.wall, "cpu": p.cpu, "turns": res["turns"], "profile": profile}))
            shutil.rmtree(repo)

    # --------------------------------------------------------------------- 7 hooks

    def bench_hooks(self) -> None:
        from opalgit.agents.claude.files import project_key

        cfg = self.cfg
        size = cfg.import_sizes[0]
        st = self.session("claude", size=size)
        plain = self.fresh_repo("hooks-plain", opal=False)
        hooked = self.fresh_repo("hooks-opal")
        for r in (plain, hooked):
            with open(os.path.join(r, "README.md"), "w") as fh:
                fh.write("# project\n")
            self.git("add", "README.md", cwd=r).check()
            self.git("commit", "-q", "-m", "initial", cwd=r).check()
        folder = os.path.join(self.home, ".claude", "projects", project_key(os.path.realpath(hooked)))
        os.makedirs(folder, exist_ok=True)
        shutil.copyfile(st.path, os.path.join(folder, os.path.basename(st.path)))
        inst = self.opal("hooks", "install", cwd=hooked)
        simulated = ""
        if inst.rc != 0:
            if "No such command" not in inst.err and "no command" not in inst.err:  # older and newer opal
                inst.check()
            simulated = "opal hooks does not exist yet: simulated with a post-commit script running 'python -m opalgit commit'"
            hook = os.path.join(hooked, ".git", "hooks", "post-commit")
            with open(hook, "w") as fh:
                fh.write(f"#!/bin/sh\n{self.python} -m opalgit commit >/dev/null 2>&1 || true\n")
            os.chmod(hook, 0o755)
        first = self.git("commit", "-q", "--allow-empty", "-m", "records the session", cwd=hooked).check()
        first_work = first.wall + _drain(hooked)
        log = self.opal("log", "-n", "1", "--json", cwd=hooked)
        recorded = log.rc == 0 and '"turns"' in log.out
        n = max(cfg.runs * 2, 5) if not cfg.quick else 2
        a, b, work = self._hook_pairs(plain, hooked, n, "c")
        linked = _all_linked(self, hooked)
        added = median(b) - median(a)
        note = (f"git commit {median(a) * 1000:.0f} ms without hooks, {median(b) * 1000:.0f} ms with (git does not "
                f"wait for the hook's work: it runs in the background, {median(work) * 1000:.0f} ms after the commit "
                f"starts until it is done, row hooks.work); first hooked commit (imports the "
                f"{size_label(st.bytes)} session) done after {first_work:.2f} s; session recorded: {recorded}; "
                f"every code commit linked: {linked}")
        if simulated:
            note += "; " + simulated
        self.row(Row("hooks", "time post-commit adds to git commit (no new turns, no server)", added, "s", median(a),
                     "git commit without hooks", target=0.15, target_on="value", note=note,
                     extra={"plain_wall": a, "hooked_wall": b, "work_wall": work, "simulated": bool(simulated),
                            "recorded": recorded, "linked": linked}))
        self.row(Row("hooks.work", "the same: from git commit's start until the hook's work in the background is done",
                     median(work), "s", median(a), "git commit without hooks",
                     note="informative: nobody waits for it; the next hook's work waits its turn (docs/hooks.md)",
                     extra={"work_wall": work}))
        # The hook's opal handed to a command server started explicitly (opt-in).
        a2, b2, work2 = self._hook_pairs(plain, hooked, n, "s", env=self.served_env)
        self.row(Row("hooks.served", "the same, the hook's opal run by the command server", median(b2) - median(a2),
                     "s", median(a2), "git commit without hooks",
                     note=f"informative: git commit {median(a2) * 1000:.0f} ms without hooks, "
                          f"{median(b2) * 1000:.0f} ms with; the work done {median(work2) * 1000:.0f} ms after",
                     extra={"plain_wall": a2, "hooked_wall": b2, "work_wall": work2}))
        self._hooks_100(n, a)
        shutil.rmtree(plain)
        shutil.rmtree(hooked)

    def _hook_pairs(self, plain: str, hooked: str, n: int, tag: str,
                    env: dict | None = None) -> tuple[list[float], list[float], list[float]]:
        """``n`` pairs of ``git commit`` without and with the hooks, taking turns; after
        each hooked one, the time until its work in the background is done (not timed
        into the pair: the next pair starts on a quiet queue)."""
        a, b, work = [], [], []
        for i in range(n):
            a.append(self.git("commit", "-q", "--allow-empty", "-m", f"{tag}{i}", cwd=plain).check().wall)
            p = self.git("commit", "-q", "--allow-empty", "-m", f"{tag}{i}", cwd=hooked, env=env).check()
            b.append(p.wall)
            work.append(p.wall + _drain(hooked))
        return a, b, work

    def _hooks_100(self, n: int, plain_walls: list[float]) -> None:
        """The hook with 100 new turns recorded by each code commit."""
        from opalgit.agents.claude.files import project_key

        marks = tuple(200 + 100 * i for i in range(n + 1))
        grown = self.session("claude", turns=marks[-1], seed=3, marks=marks)
        busy = self.fresh_repo("hooks-opal-100")
        with open(os.path.join(busy, "README.md"), "w") as fh:
            fh.write("# project\n")
        self.git("add", "README.md", cwd=busy).check()
        self.git("commit", "-q", "-m", "initial", cwd=busy).check()
        self.opal("hooks", "install", cwd=busy).check()
        folder = os.path.join(self.home, ".claude", "projects", project_key(os.path.realpath(busy)))
        os.makedirs(folder, exist_ok=True)
        live = os.path.join(folder, os.path.basename(grown.path))
        with open(grown.path, "rb") as fh:
            data = fh.read()
        with open(live, "wb") as fh:
            fh.write(data[: grown.marks[marks[0]]])
        self.git("commit", "-q", "--allow-empty", "-m", "records the first turns", cwd=busy).check()
        _drain(busy)
        c, work = [], []
        for i in range(n):
            with open(live, "ab") as fh:
                fh.write(data[grown.marks[marks[i]] : grown.marks[marks[i + 1]]])
            p = self.git("commit", "-q", "--allow-empty", "-m", f"c{i}", cwd=busy).check()
            c.append(p.wall)
            work.append(p.wall + _drain(busy))
        self.row(Row("hooks.100", "time post-commit adds to git commit (100 new turns)", median(c) - median(plain_walls),
                     "s", median(plain_walls), "git commit without hooks",
                     note=f"git commit {median(c) * 1000:.0f} ms with 100 new turns recorded each time, "
                          f"in the background, done {median(work) * 1000:.0f} ms after",
                     extra={"hooked_wall": c, "work_wall": work}))
        shutil.rmtree(busy)

    # --------------------------------------------------------------------- 8 peers

    def bench_peers(self) -> None:
        cfg = self.cfg
        size = cfg.main_size
        st = self.session("claude", size=size)
        hc, why = _install_hc(self)
        if hc is None:
            self.na("peers.time", "hc (harness-convert) claude -> codex", why)
            self.na("peers.tool_calls", "tool calls kept as tool calls, opal vs hc", why)
            return
        home = os.path.join(self.work, "peers-home")
        env = hermetic_env(home)
        cwd = os.path.join(self.work, "peers-project")
        os.makedirs(cwd, exist_ok=True)
        folder = os.path.join(home, ".claude", "projects", re.sub(r"[^A-Za-z0-9]", "-", cwd))
        os.makedirs(folder, exist_ok=True)
        shutil.copyfile(st.path, os.path.join(folder, os.path.basename(st.path)))
        walls, cpus, ow = [], [], []
        hc_file = opal_file = None
        repo = self._ensure_import(size)
        sessions = os.path.join(home, ".codex", "sessions")
        for i in range(cfg.runs):
            shutil.rmtree(sessions, ignore_errors=True)
            p = run([hc, "convert", "--from", "claude", "--to", "codex", "--cwd", cwd, "--no-interactive", "-y",
                     st.session_id], cwd=cwd, env=env)
            if p.rc != 0:
                self.na("peers.time", "hc (harness-convert) claude -> codex",
                        f"hc exited {p.rc}: {(p.err or p.out).strip()[-300:]}")
                self.na("peers.tool_calls", "tool calls kept as tool calls, opal vs hc", "hc failed")
                return
            walls.append(p.wall)
            cpus.append(p.cpu)
            found = [os.path.join(b, f) for b, _, fs in os.walk(sessions) for f in fs if f.endswith(".jsonl")]
            hc_file = max(found, key=os.path.getmtime) if found else None
            # opal's export of the same session, taking turns with hc (see bench_import).
            e = self.opal("export", "--to", "codex", "--json", cwd=repo)
            if e.rc != 0 and _not_implemented(e):
                self.na("peers.time", "hc vs opal export --to codex", "opal's Codex export is not implemented")
                return
            e.check()
            ow.append(e.wall)
            if opal_file:
                os.unlink(opal_file)
            opal_file = json.loads(e.out)["files"][0]
        opal_wall = median(ow)
        assert opal_file is not None
        hc_calls = _codex_calls(hc_file) if hc_file else {}
        opal_calls = _codex_calls(opal_file)
        self.row(Row("peers.time", f"hc convert claude -> codex, {size_label(st.bytes)} session", median(walls), "s",
                     opal_wall, "opal export --to codex (after import)",
                     note=f"hc cpu {median(cpus):.2f} s; opal import before export: "
                          f"{self.import_wall.get(size, float('nan')):.2f} s",
                     extra={"runs_wall": walls, "baseline_wall": ow, "hc_file": hc_file}))
        more = ("opal" if opal_calls.get("calls", 0) > hc_calls.get("calls", 0)
                else "hc" if opal_calls.get("calls", 0) < hc_calls.get("calls", 0) else "neither")
        self.row(Row("peers.tool_calls", "tool calls kept as tool calls in the Codex output (opal / hc)",
                     opal_calls.get("calls", 0), "calls", hc_calls.get("calls", 0), "hc",
                     note=f"source has {st.tool_calls} tool calls; {more} keeps more. opal: {opal_calls}; hc: {hc_calls}",
                     extra={"opal": opal_calls, "hc": hc_calls, "source_calls": st.tool_calls,
                            "baseline_unit": "calls"}))

    # ----------------------------------------------------------------------- 9 handoff

    def bench_handoff(self) -> None:
        from .handoff import bench_handoff

        bench_handoff(self)

    # ----------------------------------------------------------------------- 10 grep

    def bench_grep(self) -> None:
        from .grep import bench_grep

        bench_grep(self)

    # --------------------------------------------------------------------- 11 capture

    def bench_capture(self) -> None:
        from bench.capture import bench_capture

        bench_capture(self)

    # ----------------------------------------------------------------------- 12 blame

    def bench_blame(self) -> None:
        from .blame import bench_blame

        bench_blame(self)

    # ----------------------------------------------------------------------- 13 web

    def bench_web(self) -> None:
        from .web import bench_web

        bench_web(self)

    # ----------------------------------------------------------------------- run

    def run(self) -> None:
        table_of: dict[str, Callable[[], None]] = {
            "import": self.bench_import, "incremental": self.bench_incremental, "storage": self.bench_storage,
            "export": self.bench_export, "read": self.bench_read, "memory": self.bench_memory,
            "hooks": self.bench_hooks, "peers": self.bench_peers, "handoff": self.bench_handoff,
            "grep": self.bench_grep, "capture": self.bench_capture, "blame": self.bench_blame,
            "web": self.bench_web,
        }
        self.log("[warm-up]")
        self.warm_up()
        self.start_server()
        try:
            self._run_all(table_of)
        finally:
            self.stop_server()

    def start_server(self) -> None:
        """Start the command server the ``served`` rows use, and run a command through it
        (its first command's process loads what the commit's modules load lazily)."""
        p = self.opal("server", "start", "--json", cwd=self.work, env=self.served_env).check()
        self.server_pid = json.loads(p.out)["pid"]
        self.servers_started.append(self.server_pid)
        self.opal("--version", cwd=self.work, env=self.served_env).check()
        self.log(f"  command server {self.server_pid} started")

    def stop_server(self) -> None:
        """Stop the server this run started (by its PID, if asking it fails)."""
        pid, self.server_pid = self.server_pid, None
        if pid is None:
            return
        self.opal("server", "stop", cwd=self.work, env=self.served_env)
        deadline = time.monotonic() + 10
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _running(pid):
            os.kill(pid, signal.SIGTERM)

    def _run_all(self, table_of: dict[str, Callable[[], None]]) -> None:
        for name in BENCHMARKS:
            if self.cfg.only and name not in self.cfg.only:
                continue
            self.log(f"[{name}]")
            t = time.perf_counter()
            try:
                table_of[name]()
            except Exception as exc:  # one benchmark failing must not hide the others
                msg = f"{type(exc).__name__}: {exc}"
                self.log(traceback.format_exc())
                for rid in ROW_IDS:
                    if _BENCH_OF_ROW[rid] == name and rid not in self.rows:
                        self.rows[rid] = Row(rid, name, status="error", note=msg[-400:])
            self.log(f"  ({time.perf_counter() - t:.1f} s)")

    def ordered_rows(self) -> list[Row]:
        out = [self.rows[r] for r in ROW_IDS if r in self.rows]
        return out + self.extra_rows


# -------------------------------------------------------------------------- helpers


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _not_implemented(p: Proc) -> bool:
    return "NotImplementedError" in p.err or "not implemented" in p.err.lower()


def _copy_range(src: str, dst: str, start: int, end: int, *, append: bool = False) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(src, "rb") as fi, open(dst, "ab" if append else "wb") as fo:
        fi.seek(start)
        left = end - start
        while left > 0:
            chunk = fi.read(min(left, 8 << 20))
            if not chunk:
                break
            fo.write(chunk)
            left -= len(chunk)


def _line_cuts(path: str, parts: int) -> list[int]:
    """Byte offsets just past a newline, near each k/parts of the file (the last is its end)."""
    size = os.path.getsize(path)
    cuts = []
    with open(path, "rb") as fh:
        for k in range(1, parts):
            fh.seek(size * k // parts)
            fh.readline()
            pos = fh.tell()
            if cuts and pos <= cuts[-1]:
                continue
            if pos < size:
                cuts.append(pos)
    cuts.append(size)
    return cuts


def _line_end(path: str, line_no: int) -> tuple[int, str | None]:
    """Byte offset just past line ``line_no`` (1-based), and the last uuid up to it."""
    last = None
    pos = 0
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, 1):
            pos += len(line)
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("uuid") and rec.get("type") in ("user", "assistant", "attachment", "system"):
                last = rec["uuid"]
            if n == line_no:
                break
    return pos, last


def _last_chain(path: str) -> tuple[str | None, str | None]:
    """The uuid and cwd of the last main-chain record of a Claude session file."""
    last = cwd = None
    with open(path, "rb") as fh:
        for line in fh:
            if b'"uuid"' not in line:
                continue
            rec = json.loads(line)
            if isinstance(rec, dict) and rec.get("uuid") and rec.get("type") in ("user", "assistant", "attachment", "system") \
                    and rec.get("isSidechain") is not True:
                last, cwd = rec["uuid"], rec.get("cwd", cwd)
    return last, cwd


_CALL_TYPES = {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
_OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output", "tool_search_output"}


def _codex_calls(path: str) -> dict:
    """Tool calls kept as tool calls (response items) in a Codex rollout, and their outputs."""
    calls = outputs = messages = flattened = 0
    with open(path, "rb") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict) or rec.get("type") != "response_item":
                continue
            p = rec.get("payload") or {}
            t = p.get("type")
            if t in _CALL_TYPES:
                calls += 1
            elif t in _OUTPUT_TYPES:
                outputs += 1
            elif t == "message":
                messages += 1
                if "tool_call" in line.decode("utf-8", "replace") and "[" in line.decode("utf-8", "replace"):
                    flattened += 1
    return {"calls": calls, "outputs": outputs, "messages": messages, "bytes": os.path.getsize(path)}


def _install_hc(b: Bench) -> tuple[str | None, str]:
    """``hc`` from PyPI (harness-convert) in a venv of its own, never in the project's deps."""
    venv = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".venv-peers")
    hc = os.path.join(venv, "bin", "hc")
    if os.path.exists(hc):
        return hc, ""
    try:
        run([sys.executable, "-m", "venv", venv]).check()
        p = run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q", "harness-convert"])
    except Exception as exc:  # noqa: BLE001
        return None, f"cannot create a venv for hc: {exc}"
    if p.rc != 0 or not os.path.exists(hc):
        shutil.rmtree(venv, ignore_errors=True)
        return None, f"pip install harness-convert failed (offline?): {p.err.strip()[-300:]}"
    return hc, ""


# ------------------------------------------------------------------------------ main


#: How long the bench waits for a hook's work in the background, at most, in seconds.
DRAIN_BOUND = 300.0


def _drain(repo: str) -> float:
    """Wait until no hook work is left in ``repo`` (its journal and jobs, see
    opalgit/hooks/queue.py); the seconds it took. Bounded: a hook that never finishes is
    an error of the row, not a hung bench."""
    from opalgit.hooks import queue as hookqueue

    opal_dir = os.path.join(repo, ".git", "opal")
    t = time.perf_counter()
    while hookqueue.pending(opal_dir) or _hook_outputs(opal_dir):
        if time.perf_counter() - t > DRAIN_BOUND:
            raise RuntimeError(f"the hooks' work in {repo} was not done within {DRAIN_BOUND:.0f} s")
        time.sleep(0.005)
    return time.perf_counter() - t


def _hook_outputs(opal_dir: str) -> list[str]:
    """The output files of hook runs still going (each removed when its opal ends)."""
    try:
        return [n for n in os.listdir(opal_dir) if n.startswith("hook-output.")]
    except FileNotFoundError:
        return []


def _all_linked(b: "Bench", repo: str) -> bool:
    """Whether every code commit made since opal's hooks were installed has its link."""
    shas = b.git("rev-list", "HEAD", cwd=repo).check().out.split()[:-1]  # the initial commit came before
    refs = set(b.git("for-each-ref", "--format=%(refname:lstrip=3)", "refs/opal/links", cwd=repo).check().out.split())
    return all(s in refs for s in shas)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes and one run: a smoke test, no timing claims")
    ap.add_argument("--sizes", help="session sizes in MB, comma-separated (default 1,50,250): the targets are judged "
                                    "at the second largest, memory at the largest")
    ap.add_argument("--runs", type=int, help="runs per timing, the median is reported (default 3; --quick: 1)")
    ap.add_argument("--only", help=f"comma-separated benchmarks: {','.join(BENCHMARKS)}")
    ap.add_argument("--shapes", help="the memory benchmark's session shapes, comma-separated (default: all; "
                                     f"realistic means the three agents' own sessions): {','.join(MEMORY_SHAPES)}")
    ap.add_argument("--out", help="write the results as JSON to this file")
    ap.add_argument("--markdown", help="write the results table as Markdown to this file")
    ap.add_argument("--workdir", help="work folder (kept; generated sessions are reused from it)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary work folder")
    args = ap.parse_args(argv)

    cfg = Config.quick_config() if args.quick else Config()
    if args.sizes:
        cfg.sizes = sorted(int(float(s) * MB) for s in args.sizes.split(","))
    if args.runs:
        cfg.runs = args.runs
    if args.only:
        cfg.only = {s.strip() for s in args.only.split(",") if s.strip()}
        unknown = cfg.only - set(BENCHMARKS)
        if unknown:
            ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    if args.shapes:
        cfg.shapes = {s.strip() for s in args.shapes.split(",") if s.strip()}
        unknown = cfg.shapes - set(MEMORY_SHAPES) - {"realistic"}
        if unknown:
            ap.error(f"unknown shape(s): {', '.join(sorted(unknown))}")
    workdir = os.path.abspath(args.workdir) if args.workdir else tempfile.mkdtemp(prefix="opal-bench-")
    os.makedirs(workdir, exist_ok=True)
    t0 = time.perf_counter()
    mach = machine()
    print("machine: " + ", ".join(f"{k}={v}" for k, v in mach.items()), file=sys.stderr, flush=True)
    b = Bench(cfg, workdir)
    mach["interpreter"] = b.python_note
    print(f"interpreter: {b.python_note}", file=sys.stderr, flush=True)
    try:
        b.run()
    finally:
        if not args.workdir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - t0
    mach["load_avg_end"] = os.getloadavg()
    rows = b.ordered_rows()
    print()
    print("Machine: " + f"{mach['cpu']}, {mach['cores']} cores, {mach['ram_gib']} GiB; Python {mach['python']}, "
          f"pygit2 {mach['pygit2']} (libgit2 {mach['libgit2']}), zstandard {mach['zstandard']} "
          f"(libzstd {mach['libzstd']}), orjson {mach['orjson']}, {mach['git']}, {mach['zstd_binary']}; "
          f"opal at {mach['opal_commit']}, run by {mach['interpreter']}; load average {mach['load_avg_start'][0]:.2f} -> {mach['load_avg_end'][0]:.2f}")
    print(f"Config: sizes {[size_label(s) for s in cfg.sizes]}, runs {cfg.runs}{' (quick)' if cfg.quick else ''}; "
          f"elapsed {elapsed:.0f} s")
    print(table(rows))
    result = {
        "machine": mach,
        "config": {"quick": cfg.quick, "runs": cfg.runs, "sizes": cfg.sizes, "inc_turns": cfg.inc_turns,
                   "read_turns": cfg.read_turns, "forks": cfg.forks, "grow_commits": cfg.grow_commits,
                   "only": sorted(cfg.only) if cfg.only else None},
        "elapsed_s": elapsed,
        "command_servers": b.servers_started,
        "rows": [r.to_json() for r in rows],
    }
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=1, default=str)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(markdown(rows) + "\n")
    errors = [r for r in rows if r.status == "error"]
    return 1 if errors else 0
