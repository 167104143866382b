#!/bin/sh
# Regenerate tests/fixtures/<agent>/generated/structures/ with the pinned real
# clients (scripts/install-agents.sh) against the scripted mocks in
# tests/clients. Arguments: clients or client:scenario (default: all).
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
exec "$PY" -m tests.clients.regenerate "$@"
