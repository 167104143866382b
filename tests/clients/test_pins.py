"""A client's version bump is one line: scripts/agent-pins.txt, read by the installer and the tests.

No network and no real client: ``scripts/install-agents.sh`` runs against a folder laid out
as npm leaves it (each package's ``package.json`` and its ``node_modules/.bin`` entry), with
an ``npm`` first on PATH that only records what it was asked to install. The harness is
imported in a fresh interpreter with ``OPAL_AGENT_PINS`` / ``OPAL_AGENTS_DIR`` pointed at the
same files, as the drift run (scripts/test-latest-clients.sh) does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from . import harness
from .drift import read_pins
from .drivers import load

REPO = harness.REPO
PINS = REPO / "scripts" / "agent-pins.txt"
INSTALL = REPO / "scripts" / "install-agents.sh"
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="install-agents.sh reads versions with node")


def _fake_tree(base: Path, pins: dict) -> Path:
    """An agents folder holding every pinned package at its version, as npm lays it out."""
    d = base / "agents"
    for name, (pkg, version) in pins.items():
        prefix = d / "node22" if name == "node22" else d
        pj = prefix / "node_modules" / pkg / "package.json"
        pj.parent.mkdir(parents=True, exist_ok=True)
        pj.write_text(json.dumps({"name": pkg, "version": version}))
        exe = prefix / "node_modules" / pkg / "bin" / "node" if name == "node22" else d / "node_modules" / ".bin" / name
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    return d


def _recording_npm(base: Path) -> tuple[Path, Path]:
    """A folder whose ``npm`` writes its arguments to a log and installs nothing."""
    bindir, log = base / "bin", base / "npm-args.log"
    bindir.mkdir()
    npm = bindir / "npm"
    npm.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexit 0\n')
    npm.chmod(0o755)
    return bindir, log


def _install(agents: Path, pins: Path, bindir: Path) -> subprocess.CompletedProcess:
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "HOME": str(agents.parent),
           "OPAL_AGENTS_DIR": str(agents), "OPAL_AGENT_PINS": str(pins)}
    return subprocess.run(["bash", str(INSTALL)], env=env, capture_output=True, text=True, timeout=120)


def _harness(pins: Path | None, agents: Path | None, code: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPAL_AGENT_PINS", "OPAL_AGENTS_DIR")}
    if pins:
        env["OPAL_AGENT_PINS"] = str(pins)
    if agents:
        env["OPAL_AGENTS_DIR"] = str(agents)
    prog = f"import json\nfrom tests.clients import harness\nprint(json.dumps({code}))"
    done = subprocess.run([sys.executable, "-c", prog], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_client_and_driver_has_a_pin():
    pins = read_pins(PINS)
    assert "node22" in pins
    assert set(harness.CLIENTS) <= set(pins), set(harness.CLIENTS) - set(pins)
    assert set(load()) <= set(pins), "a driver in tests/clients/drivers/ has no line in scripts/agent-pins.txt"
    assert {c: list(v) for c, v in harness.PINNED.items()} == {c: list(pins[c]) for c in harness.CLIENTS}


def test_the_harness_reads_the_pins_file_install_agents_reads():
    got = _harness(None, None, "[str(harness.PINS_FILE), {k: list(v) for k, v in harness.PINNED.items()}]")
    assert Path(got[0]) == PINS
    assert 'PINS="${OPAL_AGENT_PINS:-$REPO/scripts/agent-pins.txt}"' in INSTALL.read_text()
    assert got[1] == {c: list(read_pins(PINS)[c]) for c in got[1]}


@needs_node
def test_installed_at_the_pins_the_installer_does_nothing(tmp_path):
    pins = read_pins(PINS)
    agents = _fake_tree(tmp_path, pins)
    bindir, log = _recording_npm(tmp_path)
    done = _install(agents, PINS, bindir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing to do" in done.stdout and not log.exists(), done.stdout
    for name, (pkg, version) in pins.items():
        assert f"{pkg}@{version} already installed" in done.stdout, (name, done.stdout)
    reasons = _harness(PINS, agents, "{c: harness.missing_reason(c) for c in harness.CLIENTS}")
    assert reasons == {c: None for c in harness.CLIENTS}, reasons


@needs_node
@pytest.mark.parametrize("client", [c for c in read_pins(PINS) if c != "node22"][:1] + ["node22"])
def test_a_version_bump_is_one_line(client, tmp_path):
    """Change one line of a copy of the pins: the installer asks npm for exactly that, and the
    harness runs (or skips, until it is installed) exactly that version."""
    pins = read_pins(PINS)
    agents = _fake_tree(tmp_path, pins)
    pkg, old = pins[client]
    new = old + "-bumped.1"
    lines = PINS.read_text().splitlines()
    bumped = [line.replace(old, new) if line.split()[:1] == [client] else line for line in lines]
    assert sum(a != b for a, b in zip(lines, bumped)) == 1
    pins_file = tmp_path / "pins.txt"
    pins_file.write_text("\n".join(bumped) + "\n")
    bindir, log = _recording_npm(tmp_path)

    done = _install(agents, pins_file, bindir)
    # the recording npm installed nothing, so the installer's own check fails, naming the pin
    asked = log.read_text().splitlines()
    assert len(asked) == 1, asked
    assert f"{pkg}@{new}" in asked[0].split() and f"{pkg}@{old}" not in asked[0].split(), asked
    assert f"{pkg}@{new} needed (found: {old})" in done.stdout, done.stdout
    assert done.returncode != 0
    if client == "node22":
        assert asked[0].split()[-1] == f"{pkg}@{new}"
        return
    others = [f"{p}@{v}" for n, (p, v) in pins.items() if n not in ("node22", client)]
    assert set(others) <= set(asked[0].split()), "the installer installs all pins together"
    if client in harness.CLIENTS:
        reason = _harness(pins_file, agents, f"[harness.PINNED[{client!r}][1], harness.missing_reason({client!r})]")
        assert reason[0] == new
        assert reason[1] == f"{client} CLI is version {old}, tests are pinned to {new}: run scripts/install-agents.sh"
