#!/usr/bin/env bash
# Make sure headless Chromium (Debian package 'chromium') is there for the browser tests; idempotent and quiet.
# Nothing happens when /usr/bin/chromium exists; otherwise apt-get installs it (as root, or through sudo -n).
# Without a way to install it, a note goes to stderr and the browser tests skip themselves.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "ensure_chromium.sh: /usr/bin/chromium is missing and this user can neither apt-get nor sudo;" \
       "install the Debian package 'chromium' to run tests/test_report_browser.py." >&2
  exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
# DPkg::Lock::Timeout: wait for a concurrent apt/dpkg run instead of failing on its lock.
if ! { "${as_root[@]}" apt-get -qq -o DPkg::Lock::Timeout=300 update \
       && "${as_root[@]}" apt-get -qq -o DPkg::Lock::Timeout=300 install -y --no-install-recommends chromium; } \
     >"$log" 2>&1; then
  echo "ensure_chromium.sh: apt-get could not install chromium:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
if [ ! -x /usr/bin/chromium ]; then
  echo "ensure_chromium.sh: apt-get finished but /usr/bin/chromium is still missing." >&2
  exit 1
fi
