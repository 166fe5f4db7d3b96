#!/usr/bin/env python3
"""Where a `lovia bench` run's time goes, leaving out the plugin's compilation.

Reads `perf script -F comm,tid,ip,sym` output on stdin, drops every sample
whose stack is inside cranelift (compiling the plugin), and prints the share
of the remaining samples spent in (inclusive) the busiest frames:

    perf record -F 1500 --call-graph dwarf,16384 -o perf.data \
        target/release/lovia bench --plugin target/plugins/diagnostics.wasm --only overhead
    perf script -i perf.data -F comm,tid,ip,sym | bench/perf-share.py
"""
import collections
import sys

COMPILING = ("cranelift", "regalloc2", "wasmtime_internal_cranelift")
samples, stack = [], []
for line in sys.stdin:
    if not line.strip():
        if stack:
            samples.append(stack)
        stack = []
    elif line[0] not in " \t":
        stack = []
    else:
        parts = line.strip().split(None, 1)
        stack.append(parts[1] if len(parts) > 1 else "?")
if stack:
    samples.append(stack)
kept = [s for s in samples if not any(m in f for f in s for m in COMPILING)]
print(f"{len(samples)} samples, {len(kept)} outside compilation")
inclusive = collections.Counter(f for s in kept for f in set(s))
for frame, n in inclusive.most_common(int(sys.argv[1]) if len(sys.argv) > 1 else 60):
    print(f"{100 * n / max(len(kept), 1):5.1f}%  {frame[:140]}")
