#!/usr/bin/env python3
"""How close each fuzz run came to a plateau: for every log given (default: logs/*.log), the
executions, the final coverage (edges, features), and how much coverage grew over the second
half of the executions. A run whose coverage grew by less than 1% over its second half is
counted as a plateau in docs/fuzzing.md."""
import glob
import os
import re
import sys

logs = sys.argv[1:] or sorted(glob.glob(os.path.join(os.path.dirname(__file__), "logs", "*.log")))
for f in logs:
    points = []
    for line in open(f, errors="replace"):
        m = re.match(r"#(\d+)\s+\S+\s+cov: (\d+) ft: (\d+)", line)
        if m:
            points.append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
    name = os.path.basename(f).split(".")[0]
    if not points:
        print(f"{name:16} no coverage lines")
        continue
    n, cov, ft = points[-1]
    half = max((c for x, c, _ in points if x <= n / 2), default=0)
    growth = (cov - half) / max(half, 1)
    verdict = "plateau" if growth < 0.01 else "still rising"
    print(f"{name:16} {n:>11,} runs  cov {cov:>5} ft {ft:>6}  +{growth:5.1%} over the second half  {verdict}")
