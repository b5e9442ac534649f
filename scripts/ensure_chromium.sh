#!/usr/bin/env bash
# Make sure headless Chromium (Debian package 'chromium') is there for the browser tests; idempotent and quiet.
# Without a way to install it, a note goes to stderr and the browser tests skip themselves (scripts/apt_ensure.sh).
set -euo pipefail
exec bash "$(dirname "$0")/apt_ensure.sh" chromium /usr/bin/chromium optional tests/test_report_browser.py
