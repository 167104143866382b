"""The drift run's table: the real-client tests' results per agent, pinned against newest release.

``scripts/test-latest-clients.sh`` installs every client at its newest release, runs
``tests/clients`` against them with ``--junitxml`` and then calls::

    python -m tests.clients.drift --junit J.xml --pinned scripts/agent-pins.txt \\
        --latest LATEST-PINS --doc docs/compatibility.md

which prints the table and writes it into ``docs/compatibility.md`` between the two markers
(the rest of that page is prose kept by hand). A matrix pair (``source-to-target`` in
``test_resume_matrix.py``) passes when each of its resumes (whole session, after a rewind, on
a branch) passed; a pair with a skipped resume is counted as not run, not as passed. The
other client tests are counted for an agent when its name is a word of the test's id.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Case", "read_junit", "read_pins", "table", "write_doc", "main", "BEGIN", "END"]

BEGIN = "<!-- drift-table:begin (written by scripts/test-latest-clients.sh) -->"
END = "<!-- drift-table:end -->"
MATRIX = "test_resume_matrix"
_PAIR = re.compile(r"\[([a-z0-9_]+)-to-([a-z0-9_]+)\]$")


@dataclass(frozen=True)
class Case:
    """One test case's outcome: ``passed``, ``failed`` (failure or error) or ``skipped``."""

    module: str
    name: str
    outcome: str
    message: str = ""

    @property
    def pair(self) -> tuple[str, str] | None:
        m = _PAIR.search(self.name)
        return (m.group(1), m.group(2)) if m and self.module.endswith(MATRIX) else None

    @property
    def words(self) -> set[str]:
        return set(re.split(r"[^a-z0-9]+", f"{self.module.rsplit('.', 1)[-1]} {self.name}".lower()))


def read_pins(path: Path) -> dict[str, tuple[str, str]]:
    """``{name: (npm package, version)}`` of a pins file (the format of scripts/agent-pins.txt)."""
    pins = {}
    for line in Path(path).read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            pins[fields[0]] = (fields[1], fields[2])
    return pins


def read_junit(path: Path) -> list[Case]:
    """The test cases of a pytest ``--junitxml`` file."""
    cases = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in tc:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", child.get("message") or ""
                break
            if child.tag == "skipped":
                outcome, message = "skipped", child.get("message") or ""
        cases.append(Case(tc.get("classname") or "", tc.get("name") or "", outcome, message))
    return cases


@dataclass
class _Row:
    agent: str
    pinned: str
    latest: str
    pairs: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # pair -> its resumes' outcomes
    other: list[Case] = field(default_factory=list)


def _rows(cases: list[Case], pinned: dict, latest: dict) -> list[_Row]:
    agents = [a for a in pinned if a != "node22"]
    rows = {a: _Row(a, pinned[a][1], latest.get(a, ("", "?"))[1]) for a in agents}
    for c in cases:
        pair = c.pair
        for a in agents:
            if pair and a in pair:
                rows[a].pairs.setdefault(pair, []).append(c.outcome)
            elif not pair and a in c.words:
                rows[a].other.append(c)
    return list(rows.values())


def _short(c: Case) -> str:
    return f"{c.module.rsplit('.', 1)[-1]}::{c.name}"


def table(cases: list[Case], pinned: dict, latest: dict) -> str:
    """The markdown table: one row an agent."""
    lines = ["| agent | pinned | latest | matrix pairs passed / total | other client tests passed / total | failures |",
             "|---|---|---|---|---|---|"]
    failed_by_pair = {}
    for c in cases:
        if c.pair and c.outcome == "failed":
            failed_by_pair.setdefault(c.pair, []).append(c.name.split("[")[0])
    for r in _rows(cases, pinned, latest):
        total = len(r.pairs)
        passed = sum(1 for o in r.pairs.values() if all(x == "passed" for x in o))
        not_run = sum(1 for o in r.pairs.values() if "skipped" in o and "failed" not in o)
        fails = [f"{s}-to-{t} ({', '.join(sorted(set(failed_by_pair[(s, t)])))})"
                 for (s, t) in sorted(r.pairs) if (s, t) in failed_by_pair]
        fails += [_short(c) for c in r.other if c.outcome == "failed"]
        o_total = sum(1 for c in r.other if c.outcome != "skipped")
        o_pass = sum(1 for c in r.other if c.outcome == "passed")
        skipped = sum(1 for c in r.other if c.outcome == "skipped")
        pairs = f"{passed} / {total}" + (f" ({not_run} not run)" if not_run else "")
        if total == 0:
            pairs = "not run (no driver or adapter yet)" if not r.other else "0 / 0"
        other = f"{o_pass} / {o_total}" + (f" ({skipped} skipped)" if skipped else "")
        mark = "" if r.pinned == r.latest else " (newer)"
        lines.append(f"| {r.agent} | {r.pinned} | {r.latest}{mark} | {pairs} | {other} | "
                     f"{'; '.join(fails) if fails else '-'} |")
    pairs_all: dict[tuple[str, str], list[str]] = {}
    for c in cases:
        if c.pair:
            pairs_all.setdefault(c.pair, []).append(c.outcome)
    ok = sum(1 for o in pairs_all.values() if all(x == "passed" for x in o))
    runs = sum(len(o) for o in pairs_all.values())
    summary = f"Matrix pairs in all: {ok} / {len(pairs_all)} passed ({runs} resumes)."
    node = f"node (Qwen Code, Pi): pinned {pinned['node22'][1]}, drift run {latest.get('node22', ('', '?'))[1]}."
    return "\n".join(lines) + "\n\n" + summary + "\n" + node + "\n"


def write_doc(doc: Path, body: str, *, date: str, command: str) -> None:
    """Put ``body`` between the markers of ``doc`` (appended with them when they are missing)."""
    block = (f"{BEGIN}\nLast drift run: {date}, `{command}`.\n\n{body}{END}")
    text = doc.read_text() if doc.exists() else "# Compatibility with the agent clients\n\n"
    if BEGIN in text and END in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    doc.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.clients.drift", description=__doc__.split("\n")[0])
    ap.add_argument("--junit", type=Path, required=True)
    ap.add_argument("--pinned", type=Path, required=True, help="the CI pins (scripts/agent-pins.txt)")
    ap.add_argument("--latest", type=Path, required=True, help="the pins file naming the newest releases")
    ap.add_argument("--doc", type=Path, help="write the table into this page (docs/compatibility.md)")
    ap.add_argument("--command", default="scripts/test-latest-clients.sh")
    args = ap.parse_args(argv)
    try:
        cases = read_junit(args.junit)
    except (OSError, ET.ParseError) as exc:
        print(f"drift: cannot read {args.junit}: {exc}; did pytest run? (rerun {args.command})", file=sys.stderr)
        return 2
    body = table(cases, read_pins(args.pinned), read_pins(args.latest))
    print(body, end="")
    if args.doc:
        date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        write_doc(args.doc, body, date=date, command=args.command)
        print(f"drift: wrote the table to {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
