#!/usr/bin/env bash
# The Debian packages the test suite drives, installed when one is missing:
#   git; nodejs and npm (the agent CLIs); zsh, fish and bash-completion (the shells
#   tests/cli/test_completion.py completes in); ripgrep (the peer the bench's grep row
#   measures opal grep against); chromium and chromium-driver (the real browser that
#   tests/web/ drives opal web's pages in, through Selenium; no browser is downloaded).
# Without root or apt-get, it names what is missing and stops.
set -euo pipefail

missing=()
command -v git >/dev/null || missing+=(git)
command -v npm >/dev/null || missing+=(nodejs npm)
command -v zsh >/dev/null || missing+=(zsh)
command -v fish >/dev/null || missing+=(fish)
[ -f /usr/share/bash-completion/bash_completion ] || missing+=(bash-completion)
command -v rg >/dev/null || missing+=(ripgrep)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)

[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "install-system-packages.sh: missing ${missing[*]}; install them (apt-get install ${missing[*]}) and run again" >&2
    exit 1
fi
echo "install-system-packages.sh: installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
