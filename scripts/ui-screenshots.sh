#!/usr/bin/env bash
# Screenshots of `atelier ui` for the docs: runs `atelier demo` into a temporary directory,
# serves its repository on a free loopback port, and has headless Chromium (Debian's
# `chromium`) capture each page into docs/ui/.
#
#   scripts/ui-screenshots.sh        # ATELIER=another binary (default: target/release/atelier)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${ATELIER:-$here/target/release/atelier}
[ -x "$bin" ] || { echo "no atelier binary at $bin: run \`cargo build --release\` first" >&2; exit 2; }
command -v chromium >/dev/null || { echo "chromium is not installed (apt-get install chromium)" >&2; exit 2; }
work=$(mktemp -d /tmp/atelier-ui-XXXXXX)
trap 'kill "$ui" 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin" demo --dir "$work/demo" >/dev/null 2>&1
"$bin" -C "$work/demo/repo" ui --listen 127.0.0.1:0 > "$work/ui.out" 2>/dev/null &
ui=$!
for _ in $(seq 50); do grep -q listening "$work/ui.out" 2>/dev/null && break; sleep 0.1; done
base=$(sed -n 's/^listening on //p' "$work/ui.out")
shot() {
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile" --hide-scrollbars --window-size=1200,"$3" \
    --screenshot="$here/docs/ui/$2.png" "$base$1" >/dev/null 2>&1
  echo "docs/ui/$2.png: $base$1"
}
shot / proposals 520
shot /proposals/7 proposal 1400
shot /ledger ledger 1000
shot /runs runs 640
shot /runs/r2 run 520
shot /improvements improvements 560
