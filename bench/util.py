"""Process timing, the hermetic environment, machine description and the results table."""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Proc:
    """One finished child process: whole-process wall time, its CPU time and peak RSS."""

    argv: list[str]
    rc: int
    wall: float  # seconds, time.perf_counter around spawn..reap
    cpu: float  # user + system seconds of the child (and its waited-for children)
    maxrss: int  # bytes, peak resident set of the child
    out: str
    err: str

    def check(self) -> "Proc":
        if self.rc != 0:
            raise RuntimeError(f"{' '.join(self.argv[:6])} exited {self.rc}: {self.err.strip()[-800:]}")
        return self


def run(argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
        stdin: bytes | None = None) -> Proc:
    """Run a command to completion; stdout/stderr go through files (no pipe deadlock)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(list(argv), cwd=cwd, env=dict(env) if env is not None else None, stdout=out,
                             stderr=err, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL)
        if stdin is not None:
            assert p.stdin is not None
            p.stdin.write(stdin)
            p.stdin.close()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Proc(list(argv), p.returncode, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024,
                    out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"))


# Runs a command and writes its own peak RSS and CPU time to argv[1]. Linux carries a
# process's peak RSS across fork and exec (it is the max with its parent's at the
# fork), so a child of the bench, whose own memory holds generated sessions, reported
# at least the bench's peak: the memory rows measured the bench. Started from this
# small interpreter, the command's floor is this interpreter's ~10 MB.
_RSS_PROBE = """
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{os.waitstatus_to_exitcode(status)} {ru.ru_maxrss} {ru.ru_utime + ru.ru_stime}")
"""


def run_measured(argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None) -> Proc:
    """:func:`run`, with the command's own peak RSS and CPU time (see ``_RSS_PROBE``); its
    wall time includes the small interpreter that starts it (~15 ms)."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as facts:
        p = run([sys.executable, "-S", "-c", _RSS_PROBE, facts.name, *argv], cwd=cwd, env=env)
        text = facts.read().split()
    if len(text) != 3:
        raise RuntimeError(f"{' '.join(argv[:6])}: the RSS probe reported nothing: {p.err.strip()[-800:]}")
    p.argv, p.rc, p.maxrss, p.cpu = list(argv), int(text[0]), int(text[1]) * 1024, float(text[2])
    return p


# What pip (distlib) writes for a console script: the ``opal`` a user runs.
_CONSOLE_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from opalgit.server.client import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def isolated_python(folder: str) -> tuple[str, list[str], str]:
    """An interpreter that starts as an installed opal does, the ``opal`` command in
    it, and a note saying which.

    A user's opal lives in a virtual environment (the README's ``python3 -m venv`` and
    ``pip install .``, or pipx): its start-up processes that environment's
    site-packages only. The interpreter that runs the bench may process more: on the
    development machines the base interpreter's ``.pth`` files import ``certifi`` and
    an editable-install finder at every start, 40 ms before ``main`` on a quiet host,
    in every timed process, figure and baseline alike. So the bench makes a venv (no
    pip, created in a few ms) whose one ``.pth`` puts this working tree and the
    folders that hold opal's dependencies on ``sys.path`` as plain paths, so their own
    ``.pth`` files are not run. Every timed Python process (opal, the orjson parse,
    the hooks opal installs) uses it, and ``opal`` is the console script pip would
    write there (``python -m opalgit`` also loads ``runpy``, a few ms). Falls back to
    ``sys.executable -m opalgit`` if no venv can be made.
    """
    import site
    import venv

    python = os.path.join(folder, "bin", "python")
    try:
        if not os.path.exists(python):
            venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
        dirs = [ROOT]
        for d in [*site.getsitepackages(), site.getusersitepackages()]:
            if os.path.isdir(d) and d not in dirs:
                dirs.append(d)
        out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
        with open(os.path.join(out, "opal-bench.pth"), "w") as fh:
            fh.write("\n".join(dirs) + "\n")
        opal = os.path.join(folder, "bin", "opal")
        with open(opal, "w") as fh:
            fh.write(_CONSOLE_SCRIPT.format(python=python))
        os.chmod(opal, 0o755)
        subprocess.run([python, "-c", "import opalgit, pygit2, click, msgpack, zstandard, orjson"],
                       capture_output=True, timeout=60, check=True)
        # A check, not a timing: in a process of its own, starting no command server.
        subprocess.run([opal, "--version"], capture_output=True, timeout=60, check=True,
                       env=dict(os.environ, OPAL_SERVER="off"))
    except (OSError, subprocess.SubprocessError) as exc:
        return sys.executable, [sys.executable, "-m", "opalgit"], f"{sys.executable} -m opalgit (no venv: {exc})"
    return python, [opal], f"the opal console script in a venv of {sys.executable}; site-packages as plain paths"


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def hermetic_env(home: str) -> dict[str, str]:
    """HOME, git identity and opal's settings pointed into the bench's own folder."""
    os.makedirs(home, exist_ok=True)
    runtime = os.path.join(home, "run")
    os.makedirs(runtime, mode=0o700, exist_ok=True)
    gitconfig = os.path.join(home, ".gitconfig")
    with open(gitconfig, "w") as fh:
        fh.write("[user]\n\tname = Bench User\n\temail = bench@example.com\n[init]\n\tdefaultBranch = main\n"
                 "[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "GIT_DIR", "GIT_WORK_TREE",
                        "GIT_INDEX_FILE", "PYTHONSTARTUP", "PYTHONDONTWRITEBYTECODE")}
    env.update({
        "HOME": home,
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "GIT_CONFIG_GLOBAL": gitconfig,
        "GIT_CONFIG_NOSYSTEM": "1",
        "OPAL_NO_PAGER": "1",
        "NO_COLOR": "1",
        "HC_NO_INTERACTIVE": "1",
        # Compiled modules are cached (as in an installed opal) but outside the source tree;
        # PYTHONDONTWRITEBYTECODE would make every process compile opal again (~0.1 s).
        "PYTHONPYCACHEPREFIX": os.path.join(home, ".pycache"),
        # Every command in a process of its own, start-up included, as the targets are
        # stated; the rows measured through the command server say so and use their
        # own environment (Bench.served_env). Its socket stays in the bench's folder.
        "OPAL_SERVER": "off",
        "XDG_RUNTIME_DIR": runtime,
        # Measure this working tree's opal, whatever is installed.
        "PYTHONPATH": ROOT + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
    })
    return env


def dir_bytes(path: str) -> int:
    """Bytes of every file under ``path`` (what ``du -b`` counts for files)."""
    total = 0
    for base, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(base, f)).st_size
            except OSError:
                pass
    return total


def objects_bytes(repo: str) -> int:
    """Loose objects plus packs (and their indexes) of a repository."""
    git_dir = os.path.join(repo, ".git")
    if not os.path.isdir(git_dir):
        git_dir = repo
    return dir_bytes(os.path.join(git_dir, "objects"))


def _first_line(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "not found"


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    import msgpack
    import pygit2
    import zstandard

    try:
        import orjson

        orjson_v = orjson.__version__
    except ImportError:
        orjson_v = "not installed"
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", "opalgit"],
                           capture_output=True, text=True).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(mem / (1 << 30), 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "pygit2": pygit2.__version__,
        "libgit2": pygit2.LIBGIT2_VERSION,
        "zstandard": zstandard.__version__,
        "libzstd": ".".join(map(str, zstandard.ZSTD_VERSION)),
        "msgpack": ".".join(map(str, msgpack.version)),
        "orjson": orjson_v,
        "git": _first_line(["git", "--version"]),
        "zstd_binary": _first_line(["zstd", "--version"]) if shutil.which("zstd") else "not installed",
        "opal_commit": head + (" (opalgit/ modified)" if dirty else ""),
        "load_avg_start": os.getloadavg(),
    }


# ------------------------------------------------------------------------------ rows


@dataclass
class Row:
    id: str
    title: str
    value: float | None = None  # the measured figure
    unit: str = "s"
    baseline: float | None = None
    baseline_title: str = ""
    ratio: float | None = None  # value / baseline
    target: float | None = None  # ratio must be <= target (or value <= target when target_on == "value")
    target_on: str = "ratio"
    status: str = "info"  # ok, MISS, info, n/a, error
    note: str = ""
    extra: dict = field(default_factory=dict)

    def judge(self) -> "Row":
        if self.status in ("n/a", "error"):
            return self
        if self.value is not None and self.baseline:
            self.ratio = self.value / self.baseline
        if self.target is None:
            self.status = "info"
            return self
        x = self.ratio if self.target_on == "ratio" else self.value
        if x is None:
            self.status = "info"
        else:
            self.status = "ok" if x <= self.target else "MISS"
        return self

    def to_json(self) -> dict:
        return dict(self.__dict__)


def fmt(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    if unit == "s":
        return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"
    if unit == "B":
        for u, d in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
            if abs(x) >= d:
                return f"{x / d:.2f} {u}"
        return f"{x:.0f} B"
    if unit == "%":
        return f"{x:.3f} %"
    if unit == "calls":
        return f"{x:.0f} calls"
    return f"{x:.3g} {unit}".strip()


def fmt_ratio(r: Row) -> str:
    if r.ratio is None:
        return "-"
    if r.unit == "%":
        return f"{r.ratio:.4f}x"
    return f"{r.ratio:.3f}x" if r.ratio < 0.1 else f"{r.ratio:.2f}x"


def fmt_target(r: Row) -> str:
    if r.target is None:
        return ""
    if r.target_on == "value":
        return "<= " + fmt(r.target, r.unit)
    return f"<= {r.target:g}x"


def table(rows: list[Row]) -> str:
    head = ["id", "measure", "value", "baseline", "ratio", "target", "status"]
    body = [[r.id, r.title, fmt(r.value, r.unit) if r.status != "n/a" else "n/a",
             (fmt(r.baseline, r.extra.get("baseline_unit", r.unit)) + (f" ({r.baseline_title})" if r.baseline_title else ""))
             if r.baseline is not None else "-",
             fmt_ratio(r), fmt_target(r), r.status] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(head, widths)), "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(str(x).ljust(w) for x, w in zip(row, widths)) for row in body]
    return "\n".join(lines)


def markdown(rows: list[Row]) -> str:
    head = ["id", "measure", "value", "baseline", "ratio", "target", "status", "note"]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        base = "-"
        if r.baseline is not None:
            base = fmt(r.baseline, r.extra.get("baseline_unit", r.unit)) + (f" ({r.baseline_title})" if r.baseline_title else "")
        cells = [r.id, r.title, fmt(r.value, r.unit) if r.status != "n/a" else "n/a", base, fmt_ratio(r),
                 fmt_target(r).replace("<=", "≤"), f"**{r.status}**" if r.status == "MISS" else r.status,
                 r.note.replace("|", "\\|").replace("\n", " ")]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
