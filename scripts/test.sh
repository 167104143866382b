#!/usr/bin/env bash
# Set up a development environment from scratch and run the whole test suite.
#
#   bash scripts/test.sh              # venv in .venv, pinned agent CLIs in .agents, pytest
#   bash scripts/test.sh -k sequence  # extra arguments go to pytest
#
# What it installs: the Debian packages the tests drive when missing
# (scripts/install-system-packages.sh: zsh, fish, bash-completion, ripgrep, and the
# Chromium and chromedriver that tests/web/ drives opal web's pages in); opal itself
# (editable) with its test extras into .venv; the real
# agent CLIs at the versions in scripts/agent-pins.txt (Claude Code, Codex, Gemini CLI,
# opencode, Qwen Code, Pi, GitHub Copilot CLI) into .agents, and the node 22 that Qwen
# Code and Pi need into .agents/node22 (npm; scripts/install-agents.sh), which the
# client-conformance tests, the resume matrix among them, drive offline against mock
# model servers on 127.0.0.1; and the pinned git hook managers (husky, lefthook,
# pre-commit) that the hook tests chain opal's hooks with (scripts/install-hook-managers.sh).
# The same tests against each client's newest release: scripts/test-latest-clients.sh.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

# The Debian packages the tests drive (shells, ripgrep, Chromium and its chromedriver),
# installed when missing (root and apt-get), else named.
bash scripts/install-system-packages.sh

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'

bash scripts/install-agents.sh
# The pinned husky, lefthook (npm) and pre-commit (PyPI) that opal's hooks are chained with.
bash scripts/install-hook-managers.sh

set +e
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$status"
