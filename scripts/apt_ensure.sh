#!/usr/bin/env bash
# Install a Debian package the tests need when a file it provides is missing; idempotent and quiet.
#
#   bash scripts/apt_ensure.sh PACKAGE 'GLOB' optional|required 'what needs it'
#
# Nothing happens when a file matches GLOB; otherwise apt-get installs PACKAGE (as root, or through sudo -n).
# Without a way to install it: `optional` writes a note to stderr and succeeds (its tests skip themselves),
# `required` fails (its tests cannot run without it).
set -euo pipefail
package=$1 glob=$2 need=$3 why=$4
found() { compgen -G "$glob" >/dev/null; }
if found; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "apt_ensure.sh: $glob is missing and this user can neither apt-get nor sudo;" \
       "install the Debian package '$package' for $why." >&2
  [ "$need" = optional ] && exit 0
  exit 1
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
# DPkg::Lock::Timeout: wait for a concurrent apt/dpkg run instead of failing on its lock.
if ! { "${as_root[@]}" apt-get -qq -o DPkg::Lock::Timeout=300 update \
       && "${as_root[@]}" apt-get -qq -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$package"; } \
     >"$log" 2>&1; then
  echo "apt_ensure.sh: apt-get could not install $package:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
if ! found; then
  echo "apt_ensure.sh: apt-get installed $package but $glob is still missing." >&2
  exit 1
fi
