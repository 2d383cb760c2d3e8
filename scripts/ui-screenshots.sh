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
ui=; trap '[ -n "$ui" ] && kill "$ui" 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin" demo --dir "$work/demo" >/dev/null 2>&1
# One more run with workers that go quiet (the demo's are too quick to record a silence): its
# stand-in agent (outside the repository) learns the tasks of plan `shot`, and the conductor
# records silences of a second and restarts after three (an uncommitted atelier.toml, which
# `run` warns about; fine in this throwaway repository).
cat >> "$work/demo/agent.sh" <<'AGENT'
case "$ATELIER_TASK_ID" in
  shot:*) n=${ATELIER_TASK_ID#shot:}; echo "working on $n"; sleep 1.$n; echo "half way"
          if [ "$n" = 3 ] && [ "$ATELIER_ATTEMPT" = 1 ]; then sleep 4; fi
          sleep 1.$((n * 2)); mkdir -p out; echo done > "out/$n.txt" ;;
esac
AGENT
printf 'nudge_after = "1s"\nrestart_after = "3s"\n' >> "$work/demo/repo/atelier.toml"
{
  printf '[plan]\nid = "shot"\ntitle = "Quiet workers"\n'
  for n in 1 2 3 4; do
    printf '\n[[task]]\nid = "%s"\ntitle = "Task %s"\nrole = "implementer"\ngoal = "Write done to out/%s.txt"\nfiles = ["out/%s.txt"]\n[task.contract]\ncriteria = ["out/%s.txt holds the line done"]\nchecks = ["grep -qx done out/%s.txt"]\n' "$n" "$n" "$n" "$n" "$n" "$n"
  done
} > "$work/shot.toml"
"$bin" -C "$work/demo/repo" run "$work/shot.toml" --quiet >/dev/null
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
shot /runs runs 1100
shot /runs/r7 run 560
shot /improvements improvements 560
