"""Every ``--json`` output follows its schema in docs/json.md (issue 19, Part B: JSON).

The schemas are data (``opalgit.cli.jsonout.SCHEMAS``); docs/json.md is generated from
them, and this test checks both ways: the doc is what the schemas render, and what
every command prints on a real session (tests/cli/json_scenario.py: a real Claude Code
session file, a real git project and bare remote, the real ``opal`` in a
subprocess) follows them, a ``version`` first and every time in ISO 8601 UTC.
"""

from __future__ import annotations

import os

import click
import pytest

from opalgit.cli import jsonout
from opalgit.cli.main import cli
from tests.cli import json_scenario

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    root = tmp_path_factory.mktemp("json")
    home = root / "home"
    home.mkdir()
    sc = json_scenario.build(root, home)
    assert sc.failures == [], sc.failures
    return sc


def _json_commands(group: click.Group, prefix: str = "opal") -> list[str]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        if isinstance(cmd, click.Group):
            out += _json_commands(cmd, path)
        elif any(p.name == "as_json" for p in cmd.params):
            out.append(path)
    return out


def test_every_command_with_json_has_a_schema():
    documented = [c for cmds, _t, _s in jsonout.SCHEMAS.values() for c in cmds]
    missing = []
    for path in _json_commands(cli):
        # "opal branch NAME [START] --json" documents "opal branch": the words up to the first argument.
        if not any(c == path + " --json" or c.startswith(path + " ") for c in documented):
            missing.append(path)
    assert missing == [], f"--json outputs without a schema in opalgit/cli/jsonout.py: {missing}"


def test_docs_json_md_is_generated_from_the_schemas():
    with open(os.path.join(ROOT, "docs", "json.md"), encoding="utf-8") as fh:
        doc = fh.read()
    assert doc == jsonout.render_doc(), "docs/json.md is stale: run .venv/bin/python -m opalgit.cli.jsonout > docs/json.md"


@pytest.mark.parametrize("name", sorted(jsonout.SCHEMAS))
def test_the_output_follows_its_schema(scenario, name):
    outputs = scenario.outputs.get(name)
    assert outputs, f"the scenario ran no command that prints {name!r}"
    _cmds, _text, schema = jsonout.SCHEMAS[name]
    for value in outputs:
        assert list(value)[0] == "version" and value["version"] == jsonout.VERSION
        assert jsonout.validate(value, schema) == [], value


def test_the_scenario_covers_each_variant(scenario):
    results = {m["result"] for m in scenario.outputs["merge"]}
    assert {"up-to-date", "merged"} <= results or {"up-to-date", "fast-forward"} <= results, results
    assert {c["committed"] for c in scenario.outputs["commit"]} == {True, False}
    assert any(t["turn"] is None for out in scenario.outputs["log-turns"] for t in out["turns"])  # --include-meta
    assert {e["command"] for e in scenario.outputs["edit"]} == {"drop", "squash", "trim"}


def test_one_unit_of_time_throughout(scenario):
    # No number anywhere under a key that names a time: times are ISO 8601 strings.
    timed = ("time", "modified", "started", "expired_before", "timestamp")

    def walk(v, path):
        if isinstance(v, dict):
            for k, x in v.items():
                if k in timed and path[:1] != ("source",):  # the agent's own record is kept as written
                    assert x is None or (isinstance(x, str) and x.endswith("Z")), (path, k, x)
                if k != "source":
                    walk(x, path + (k,))
        elif isinstance(v, list):
            for x in v:
                walk(x, path)

    for name, outs in scenario.outputs.items():
        for out in outs:
            walk(out, (name,))


def test_the_validator_catches_what_it_must():
    sch = jsonout.obj({"a": jsonout.INT, "t": jsonout.TIME, "n": jsonout.null(jsonout.OID)}, optional=("n",))
    assert jsonout.validate({"a": 1, "t": "2026-12-01T23:45:07Z"}, sch) == []
    assert jsonout.validate({"a": 1, "t": "2026-12-01T23:45:07.071Z", "n": None}, sch) == []
    assert "'t' is missing" in jsonout.validate({"a": 1}, sch)[0]
    assert "not documented" in jsonout.validate({"a": 1, "t": "2026-12-01T23:45:07Z", "b": 2}, sch)[0]
    assert "ISO 8601" in jsonout.validate({"a": 1, "t": "1796168749"}, sch)[0]
    assert "is not string" in jsonout.validate({"a": 1, "t": 1796168749}, sch)[0]
    assert "is not integer" in jsonout.validate({"a": True, "t": "2026-12-01T23:45:07Z"}, sch)[0]
    assert "does not match" in jsonout.validate({"a": 1, "t": "2026-12-01T23:45:07Z", "n": "abc"}, sch)[0]
    assert jsonout.iso_ms(1757238723071) == "2025-09-07T09:52:03.071Z"
    assert jsonout.iso_seconds(1796168749) == "2026-12-01T23:45:49Z"
    assert jsonout.iso_ms(None) is None and jsonout.iso_seconds(None) is None
    with pytest.raises(TypeError):
        jsonout.envelope({"version": 3})
