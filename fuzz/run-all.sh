#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), seeded from seeds/<target>. New inputs go
# to corpus/<target>, crashes to artifacts/<target>, each run's output to logs/<target>.log; the
# last line of each run (executions, coverage) is printed. Exits 1 if any target failed.
# Usage: fuzz/run-all.sh [SECONDS] [TARGET...]   (needs nightly and cargo-fuzz: docs/fuzzing.md)
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
mkdir -p logs
failed=()
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "seeds/$t"
  extra=()
  # libgit2's patch parser leaks 16 bytes on a repeated `rename from` header (upstream; the
  # process exits right after a propose): leak reports would stop the run at the first one.
  leaks=1
  if [ "$t" = patch ]; then extra=(-detect_leaks=0); leaks=0; fi
  # TOML and JSON targets splice the format's tokens and their seeds' keys (dicts/make.py).
  if [ -f "dicts/$t.dict" ]; then extra+=("-dict=dicts/$t.dict"); fi
  if ASAN_OPTIONS="detect_leaks=$leaks" cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${extra[@]}" \
      >"logs/$t.log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$t")
  fi
  summary=$(grep -E '^#[0-9]+' "logs/$t.log" | tail -n 1)
  printf '%-16s %-6s %s\n' "$t" "$status" "$summary"
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "failed: ${failed[*]} (see fuzz/logs/ and fuzz/artifacts/)"
  exit 1
fi
