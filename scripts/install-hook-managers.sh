#!/usr/bin/env bash
# Install the pinned git hook managers that tests/compat/test_hook_managers.py chains opal's
# hooks with: husky and lefthook from npm into $REPO/.hook-managers, pre-commit from
# PyPI into the virtualenv (.venv, or $OPAL_VENV).
#
#   scripts/install-hook-managers.sh
#   OPAL_HOOK_MANAGERS_DIR=/opt/hm scripts/install-hook-managers.sh
#
# Idempotent: when every pinned version is already installed it does nothing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${OPAL_HOOK_MANAGERS_DIR:-$REPO/.hook-managers}"
VENV="${OPAL_VENV:-$REPO/.venv}"

# Keep in sync with tests/compat/test_hook_managers.py (PINNED). lefthook 2.2.1: the newest
# release whose builds for every platform npm resolves here.
NPM_PKGS=("husky@9.1.7" "lefthook@2.2.1")
PRE_COMMIT="pre-commit==4.7.0"

installed_version() {  # $1 = npm package name -> its installed version, or nothing
  local pj="$DIR/node_modules/$1/package.json"
  [ -f "$pj" ] || return 0
  node -e 'try{process.stdout.write(require(process.argv[1]).version||"")}catch(e){}' "$pj"
}

if command -v npm >/dev/null 2>&1; then
  missing=()
  for spec in "${NPM_PKGS[@]}"; do
    name="${spec%@*}" want="${spec##*@}"
    have="$(installed_version "$name")"
    [ "$have" = "$want" ] || missing+=("$spec")
  done
  for bin in husky lefthook; do
    [ -x "$DIR/node_modules/.bin/$bin" ] || missing=("${NPM_PKGS[@]}")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "install-hook-managers: ${NPM_PKGS[*]} already installed ($DIR)"
  else
    mkdir -p "$DIR"
    echo "install-hook-managers: npm install --prefix $DIR ${NPM_PKGS[*]}"
    # --ignore-scripts: lefthook's postinstall runs 'lefthook install' in the folder npm
    # was started from, which would write a lefthook.yml and git hooks into this
    # repository. Neither package needs a script: lefthook's binary comes in a package.
    npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error --save-exact --ignore-scripts "${NPM_PKGS[@]}"
    for spec in "${NPM_PKGS[@]}"; do
      name="${spec%@*}" want="${spec##*@}"
      have="$(installed_version "$name")"
      if [ "$have" != "$want" ]; then
        echo "install-hook-managers: after install $name is ${have:-missing}, wanted $want" >&2
        exit 1
      fi
    done
    "$DIR/node_modules/.bin/lefthook" version >/dev/null  # its binary for this platform came too
  fi
else
  echo "install-hook-managers: npm not found on PATH; husky and lefthook are not installed (their tests skip)" >&2
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "install-hook-managers: no virtualenv at $VENV (run scripts/test.sh, or set OPAL_VENV)" >&2
  exit 1
fi
if [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("pre-commit"))' 2>/dev/null)" = "${PRE_COMMIT#*==}" ]; then
  echo "install-hook-managers: $PRE_COMMIT already installed ($VENV)"
else
  echo "install-hook-managers: pip install $PRE_COMMIT into $VENV"
  "$VENV/bin/python" -m pip install --quiet "$PRE_COMMIT"
fi
