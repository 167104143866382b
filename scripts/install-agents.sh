#!/usr/bin/env bash
# Install the pinned agent CLIs (Claude Code, Codex CLI, Gemini CLI) that the
# client-conformance tests in tests/clients/ drive offline against mock servers.
#
#   scripts/install-agents.sh            # installs into $REPO/.agents
#   OPAL_AGENTS_DIR=/opt/agents scripts/install-agents.sh
#
# Idempotent: when every pinned version is already installed it does nothing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${OPAL_AGENTS_DIR:-$REPO/.agents}"

# package@version pairs; keep in sync with tests/clients/harness.py (PINNED).
PKGS=(
  "@anthropic-ai/claude-code@2.1.328"
  "@openai/codex@0.169.0"
  "@google/gemini-cli@0.61.0"
)

if ! command -v npm >/dev/null 2>&1; then
  echo "install-agents: npm not found on PATH (install node >= 20 first)" >&2
  exit 1
fi

installed_version() {  # $1 = package name -> prints installed version or nothing
  local pj="$DIR/node_modules/$1/package.json"
  [ -f "$pj" ] || return 0
  node -e 'try{process.stdout.write(require(process.argv[1]).version||"")}catch(e){}' "$pj"
}

missing=()
for spec in "${PKGS[@]}"; do
  name="${spec%@*}"
  want="${spec##*@}"
  have="$(installed_version "$name")"
  if [ "$have" = "$want" ]; then
    echo "install-agents: $name@$want already installed"
  else
    echo "install-agents: $name@$want needed (found: ${have:-none})"
    missing+=("$spec")
  fi
done

for bin in claude codex gemini; do
  if [ ! -x "$DIR/node_modules/.bin/$bin" ] && [ ${#missing[@]} -eq 0 ]; then
    echo "install-agents: $DIR/node_modules/.bin/$bin missing; reinstalling all"
    missing=("${PKGS[@]}")
    break
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-agents: nothing to do ($DIR)"
  exit 0
fi

mkdir -p "$DIR"
echo "install-agents: npm install --prefix $DIR ${PKGS[*]}"
# Install all pins together so npm resolves one consistent tree.
npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "${PKGS[@]}"

for spec in "${PKGS[@]}"; do
  name="${spec%@*}"
  want="${spec##*@}"
  have="$(installed_version "$name")"
  if [ "$have" != "$want" ]; then
    echo "install-agents: after install $name is ${have:-missing}, wanted $want" >&2
    exit 1
  fi
done
for bin in claude codex gemini; do
  [ -x "$DIR/node_modules/.bin/$bin" ] || { echo "install-agents: $bin binary missing" >&2; exit 1; }
done
echo "install-agents: installed ${PKGS[*]} into $DIR"
