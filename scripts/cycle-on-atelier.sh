#!/usr/bin/env bash
# Runs the self-improvement cycle on a clone of Atelier itself: adopts the clone (three throwaway
# maintainers' keys, a gate key), records telemetry from routine runs of a scripted agent, then
# `atelier cycle --from tune` and then `--from lint` on Atelier's own code — the proposer, the registered metric, the replay benchmark, the
# user-testing validator (the patched atelier built and run: `atelier demo` and `bench replay`),
# the evidence, the review panel — and prints where the resulting record is. Atelier's own
# proposals/ keeps one such record as the worked example (proposals/README.md).
#
#   scripts/cycle-on-atelier.sh [WORKDIR]   # ATELIER=another binary, LINT_FAMILY=a [proposers.lint] family,
#                                           # CYCLES="tune lint" (the default) or one of them
#
# One deviation from Atelier's own atelier.toml, in the clone's adoption commit: the gauntlet is
# `cargo fmt --check` alone, so that the telemetry runs take seconds (every passing attempt runs
# the gauntlet; Atelier's full one runs the whole test suite). The user-testing validator and the
# conductor settings are Atelier's own. Needs the crates in ~/.cargo (`cargo fetch`): the
# validator builds offline.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${ATELIER:-$here/target/release/atelier}
[ -x "$bin" ] || { echo "no atelier binary at $bin: run \`cargo build --release\` first" >&2; exit 2; }
work=${1:-$(mktemp -d /tmp/atelier-cycle-XXXXXX)}
mkdir -p "$work"
[ -z "$(ls -A "$work")" ] || { echo "$work is not empty: give a new directory" >&2; exit 2; }
repo=$work/atelier
git clone -q "$here" "$repo"
cd "$repo"
git config user.email maintainer@atelier.invalid
git config user.name "A maintainer"

# Adoption: three maintainers' keys, the gate key, a light gauntlet, the scripted agent's role.
for who in ada grace linus; do
  "$bin" keygen "$work/keys/$who" --principal "$who@atelier.invalid" | tail -n 1 >> policies/allowed_signers
done
"$bin" init >/dev/null
cat > "$work/agent.sh" <<'AGENT'
#!/bin/sh
# A scripted worker: A is right at once, B at its third attempt, C never.
cat > /dev/null
mkdir -p docs/telemetry
case "$ATELIER_TASK_ID" in
  *:A) echo done > docs/telemetry/a.md ;;
  *:B) if [ "$ATELIER_ATTEMPT" -ge 3 ]; then echo done > docs/telemetry/b.md; else echo wrong > docs/telemetry/b.md; fi ;;
  *:C) echo wrong > docs/telemetry/c.md ;;
esac
AGENT
chmod +x "$work/agent.sh"
python3 - "$work/agent.sh" <<'PY'
import re, sys
text = open("atelier.toml").read()
start = text.index("[[gauntlet.steps]]")
end = text.index("# Liveness and retries")
light = '[[gauntlet.steps]]\nname = "fmt"\nrun = "cargo fmt --check"\ntimeout = "5m"\n\n'
text = text[:start] + light + text[end:]
text += '\n[roles.implementer]\nbackend = "command"\ncommand = ["%s"]\n' % sys.argv[1]
open("atelier.toml", "w").write(text)
PY
git add -A
git commit -qm "Adopt atelier (a clone for scripts/cycle-on-atelier.sh)"

# Telemetry: five routine runs.
cat > "$work/routine.toml" <<'PLAN'
[plan]
id = "routine"
title = "Routine documentation work"

[[task]]
id = "A"
title = "A"
role = "implementer"
goal = "Write done to docs/telemetry/a.md"
files = ["docs/telemetry/a.md"]
[task.contract]
criteria = ["docs/telemetry/a.md holds the line done"]
checks = ["grep -qx done docs/telemetry/a.md"]

[[task]]
id = "B"
title = "B"
role = "implementer"
goal = "Write done to docs/telemetry/b.md"
files = ["docs/telemetry/b.md"]
[task.contract]
criteria = ["docs/telemetry/b.md holds the line done"]
checks = ["grep -qx done docs/telemetry/b.md"]

[[task]]
id = "C"
title = "C"
role = "implementer"
goal = "Write done to docs/telemetry/c.md"
files = ["docs/telemetry/c.md"]
[task.contract]
criteria = ["docs/telemetry/c.md holds the line done"]
checks = ["grep -qx done docs/telemetry/c.md"]
PLAN
for i in 1 2 3 4 5; do
  "$bin" run "$work/routine.toml" >/dev/null 2>&1 || true
done
"$bin" stats | head -n 20

# One cycle: `cycle NAME ARGS...` runs `atelier cycle ARGS` and keeps its record under
# $work/record/.
cycle() {
  local name=$1; shift
  set +e
  "$bin" cycle "$@" --json > "$work/$name.json"
  local code=$?
  set -e
  local id
  # A cycle that stopped on an error printed no JSON (the error is above).
  id=$(python3 -c 'import json,sys
try:
    print(json.load(open(sys.argv[1]))["proposal"] or "")
except ValueError:
    print("")' "$work/$name.json")
  echo "$name: cycle exit $code; proposal ${id:-none}; its JSON: $work/$name.json"
  if [ -n "$id" ]; then
    local record out
    record=$(git ls-tree --name-only "atelier/proposals/$id" proposals/ | grep "^proposals/$id-")
    out=$work/record/$(basename "$record")
    mkdir -p "$out"
    for f in proposal.toml evidence.json evidence.md; do
      git show "atelier/proposals/$id:$record/$f" > "$out/$f"
    done
    "$bin" show "$id" > "$out/show.txt"
    "$bin" audit show "$id" > "$out/audit.txt"
    echo "$name: the record: $out"
  fi
  return 0
}

# `tune` from the telemetry, then `lint` on Atelier's own code (one family of [proposers.lint]).
for c in ${CYCLES:-tune lint}; do
  case $c in
    tune) cycle tune --from tune --seeds 5 ;;
    lint) cycle lint --from lint --family "${LINT_FAMILY:-semicolon_if_nothing_returned}" --seeds 2 ;;
    *) echo "CYCLES: unknown cycle $c (tune, lint)" >&2; exit 2 ;;
  esac
done
