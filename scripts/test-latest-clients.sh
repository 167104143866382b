#!/usr/bin/env bash
# The drift run: the real-client tests (tests/clients) against every client's newest release.
#
#   bash scripts/test-latest-clients.sh            # installs into .agents-latest, runs, writes the table
#   OPAL_LATEST_DIR=/tmp/latest bash scripts/test-latest-clients.sh -k matrix   # extra args go to pytest
#
# 1. Asks npm for each client's newest release (`npm view <pkg> version`; node: the newest of the
#    pinned major, since the line is the "node >= 22" the clients need) and writes a pins file naming
#    them: $OPAL_LATEST_DIR/agent-pins.txt, same format as scripts/agent-pins.txt.
# 2. Installs them with scripts/install-agents.sh into $OPAL_LATEST_DIR (never .agents).
# 3. Runs tests/clients with OPAL_AGENTS_DIR and OPAL_AGENT_PINS pointed there, so the harness
#    runs the newest clients instead of skipping them as "not the pinned version", and the whole
#    resume matrix (OPAL_MATRIX unset: every pair, also rewound and on a branch). Each
#    client run is bounded by the harness's timeout; the whole run by OPAL_DRIFT_TIMEOUT seconds.
# 4. Prints the table (agent, pinned, latest, pairs passed / total, failures) and writes it into
#    docs/compatibility.md (python -m tests.clients.drift).
# Exit status: pytest's (0 when every test passed); the table is written either way.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
DIR="${OPAL_LATEST_DIR:-$REPO/.agents-latest}"
PINNED="$REPO/scripts/agent-pins.txt"
LATEST="$DIR/agent-pins.txt"
PY="${PYTHON:-$REPO/.venv/bin/python}"
[ -x "$PY" ] || { echo "test-latest-clients: $PY not found: run scripts/test.sh once (it makes .venv)" >&2; exit 1; }
command -v npm >/dev/null || { echo "test-latest-clients: npm not found on PATH" >&2; exit 1; }
case "$(cd "$(dirname "$DIR")" 2>/dev/null && pwd)/$(basename "$DIR")" in
  "$REPO/.agents") echo "test-latest-clients: OPAL_LATEST_DIR must not be .agents (the pinned clients)" >&2; exit 1 ;;
esac
mkdir -p "$DIR"

newest() {  # $1 = package, $2 = optional range -> the newest version npm has
  local spec="$1${2:+@$2}" out
  out="$(npm view "$spec" version --json 2>/dev/null)" || { echo "test-latest-clients: npm view $spec failed" >&2; return 1; }
  node -e 'const v=JSON.parse(process.argv[1]); process.stdout.write(String(Array.isArray(v) ? v[v.length-1] : v))' "$out"
}

tmp="$LATEST.tmp"
echo "# Written by scripts/test-latest-clients.sh on $(date -u +%Y-%m-%dT%H:%MZ): each client's newest release." > "$tmp"
while read -r name pkg version _; do
  case "$name" in ''|\#*) continue ;; esac
  if [ "$name" = node22 ]; then
    latest="$(newest "$pkg" "${version%%.*}")"
  else
    latest="$(newest "$pkg")"
  fi
  [ -n "$latest" ] || { echo "test-latest-clients: no version for $pkg" >&2; exit 1; }
  echo "test-latest-clients: $name $pkg pinned $version, newest $latest"
  printf '%-9s %-33s %s\n' "$name" "$pkg" "$latest" >> "$tmp"
done < "$PINNED"
mv "$tmp" "$LATEST"

OPAL_AGENTS_DIR="$DIR" OPAL_AGENT_PINS="$LATEST" bash "$REPO/scripts/install-agents.sh"

JUNIT="$DIR/junit.xml"
rm -f "$JUNIT"
set +e
env -u OPAL_MATRIX OPAL_AGENTS_DIR="$DIR" OPAL_AGENT_PINS="$LATEST" \
  timeout --signal=INT --kill-after=60 "${OPAL_DRIFT_TIMEOUT:-10800}" \
  "$PY" -m pytest -q -p no:cacheprovider -m clients --junitxml="$JUNIT" tests/clients "$@"
status=$?
set -e
"$PY" -m tests.clients.drift --junit "$JUNIT" --pinned "$PINNED" --latest "$LATEST" \
  --doc "$REPO/docs/compatibility.md" --command "bash scripts/test-latest-clients.sh${*:+ $*}"
exit "$status"
