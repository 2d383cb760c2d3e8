#!/usr/bin/env python3
"""Where a fuzz run's coverage grew: Atelier's own code, or the crates it calls.

libFuzzer's `cov:` counts every instrumented edge, the dependencies' included (the toml
parser, globset's and regex's compilers, serde), so a target whose input reaches a regex
compiler can keep finding "new coverage" inside that compiler long after Atelier's own parsing
code has stopped growing. This script splits it: it replays the corpus as it stood at CUTOFF
(files no newer than it, with the seeds) and as it stands now through the target built by
`cargo fuzz build`, with libFuzzer's -print_coverage=1, and sums the covered edges of the
functions in Atelier's src/ apart from everyone else's.

Usage: fuzz/owncov.py TARGET CUTOFF [END] [-v]   (END: the corpus as it stood then, not now;
-v: Atelier's functions whose coverage changed; CUTOFF: a date `date -d` understands, e.g. the middle of
the run: "2026-12-02 02:11")
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
target, cutoff = sys.argv[1], sys.argv[2]
def epoch(when):
    return float(subprocess.check_output(["date", "-d", when, "+%s"], text=True))


limit = epoch(cutoff)
rest = [a for a in sys.argv[3:] if a != "-v"]
end = epoch(rest[0]) if rest else None
binary = os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.join(here, "target")),
    "x86_64-unknown-linux-gnu", "release", target)


def inputs(folder, newest=None):
    d = os.path.join(here, folder, target)
    if not os.path.isdir(d):
        return []
    return [os.path.join(d, f) for f in os.listdir(d)
            if newest is None or os.stat(os.path.join(d, f)).st_mtime <= newest]


def covered(files):
    """Covered edges by origin: 'atelier' (src/ of this repository), 'dependencies', 'std'."""
    with tempfile.TemporaryDirectory(dir=here) as d:
        for i, f in enumerate(files):
            try:
                os.link(f, os.path.join(d, str(i)))
            except OSError:
                shutil.copy(f, os.path.join(d, str(i)))
        out = subprocess.run(
            [binary, "-runs=0", "-print_coverage=1", "-rss_limit_mb=4096", "-timeout=30", d],
            capture_output=True, text=True, errors="replace",
            env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    sums = {"atelier": 0, "dependencies": 0, "std": 0}
    funcs = {}
    for line in (out.stdout + out.stderr).splitlines():
        m = re.match(r"COVERED_FUNC: hits: \d+ edges: (\d+)/\d+ (.*) (\S+):\d+$", line)
        if not m:
            continue
        path = m.group(3)
        if "/.cargo/registry/" in path or "/.cargo/git/" in path:
            origin = "dependencies"
        elif path.startswith("/rustc/") or "/library/" in path:
            origin = "std"
        else:
            origin = "atelier"
        sums[origin] += int(m.group(1))
        if origin == "atelier":
            funcs[m.group(2)] = funcs.get(m.group(2), 0) + int(m.group(1))
    if not any(sums.values()):
        sys.exit(f"{binary}: no coverage printed (is it built? `cargo +nightly fuzz build {target}`)")
    return sums, funcs


seeds = inputs("seeds")
(before, fb) = covered(seeds + inputs("corpus", limit))
(after, fa) = covered(seeds + inputs("corpus", end))
for origin in before:
    b, a = before[origin], after[origin]
    print(f"{target:14} {origin:12} edges at the cutoff {b:>6}, at the end {a:>6}  +{(a - b) / max(b, 1):6.2%}")
if "-v" in sys.argv[3:]:
    for f in sorted(set(fa) | set(fb)):
        if fa.get(f, 0) != fb.get(f, 0):
            print(f"  {fb.get(f, 0):>4} -> {fa.get(f, 0):>4}  {f}")
