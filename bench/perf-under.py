#!/usr/bin/env python3
"""Where the samples under a frame go, from a perf recording with call graphs.

    perf record -F 30000 --call-graph dwarf,32768 -o cold.perf -- lovia ... bench ...
    bench/perf-under.py cold.perf 'cold_start::{{closure}}::{{closure}}::{{closure}}' load_file_with

Takes the samples whose stack holds both ROOT and FRAME (FRAME inside ROOT),
and groups them by the three frames below FRAME's innermost appearance. A
release build has no debug info, but its unwind tables (.eh_frame) are enough
for `--call-graph dwarf`.
"""
import collections
import subprocess
import sys

if len(sys.argv) != 4:
    sys.exit(__doc__)
data, root, frame = sys.argv[1:]
text = subprocess.run(
    ["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True, text=True, check=True
).stdout
total, below = 0, collections.Counter()
for sample in text.split("\n\n"):
    if root not in sample or frame not in sample:
        continue
    total += 1
    # Innermost frame first, as perf script prints them.
    frames = [line.strip().split(" ", 1)[-1] for line in sample.strip().splitlines()]
    at = [i for i, f in enumerate(frames) if frame in f]
    chain = frames[max(0, at[-1] - 3) : at[-1]][::-1]
    below[" < ".join(f[:80] for f in chain) or "(self)"] += 1
if total == 0:
    sys.exit(f"no sample holds {root!r} and {frame!r}")
print(f"{total} samples under {frame} in {root}")
for chain, n in below.most_common(12):
    print(f"{100 * n / total:5.1f}%  {chain}")
