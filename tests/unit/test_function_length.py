"""No function of the porcelain is longer than 80 lines (issue 20).

A verb's function that grows past a screen or two is several steps, each of which can
be named and read on its own (docs/style.md, habit 14). Lines are counted from the
``def`` (decorators excluded) to the function's last line, docstring and comments
included; a nested function counts inside its parent and on its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

LIMIT = 80
PORCELAIN = Path(__file__).resolve().parents[2] / "opalgit" / "porcelain"


def long_functions(folder: Path = PORCELAIN, limit: int = LIMIT) -> list[str]:
    """``path:line name (N lines)`` of every function in ``folder`` longer than ``limit``."""
    out = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    out.append(f"{path.relative_to(folder.parent.parent)}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_no_porcelain_function_is_longer_than_80_lines():
    offenders = long_functions()
    assert not offenders, f"functions over {LIMIT} lines (split them into named steps):\n" + "\n".join(offenders)


def test_the_check_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{n} = {n}" for n in range(LIMIT))
    (tmp_path / "long.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    assert [o.split(" ", 1)[1] for o in long_functions(tmp_path)] == [f"long ({LIMIT + 1} lines)"]
