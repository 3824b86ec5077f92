#!/usr/bin/env bash
# kaleido (plotly's SVG/PNG export) drives a Chrome/Chromium; install Debian's when none is found.
set -u
for b in "${BROWSER_PATH:-}" chromium chromium-browser google-chrome google-chrome-stable; do
  [ -n "$b" ] && command -v "$b" >/dev/null 2>&1 && exit 0
done
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
  echo "Installing Chromium for SVG export (apt-get install chromium)..."
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium librsvg2-bin >/dev/null \
    && exit 0
fi
echo "warning: no Chrome/Chromium found and it could not be installed; SVG export will be skipped" \
     "(Debian/Ubuntu: apt-get install chromium)" >&2
exit 0
