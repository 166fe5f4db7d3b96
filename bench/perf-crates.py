#!/usr/bin/env python3
"""Self time of a flat profile (a release build has no call graphs), grouped
by the crate each symbol belongs to, and the kernel by what it was doing:

    perf report -i perf.data --no-children --sort dso,sym --stdio | bench/perf-crates.py
"""
import collections
import re
import sys

KERNEL = [
    ("kernel: waking another CPU", ("_raw_spin_unlock_irqrestore", "_raw_spin_unlock_irq", "try_to_wake_up", "finish_task_switch")),
    ("kernel: TCP and loopback", ("tcp_", "ip_", "skb", "sock_", "net_", "__dev_queue", "napi", "inet_", "copy_user", "__netif")),
    ("kernel: memory (faults, madvise, pagemap)", ("page", "pagemap", "madvise", "clear_page", "pte", "pmd", "folio", "tlb", "lru")),
    ("kernel: epoll and futex", ("epoll", "futex", "ep_")),
]
shares = collections.Counter()
for line in sys.stdin:
    m = re.match(r"\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)", line)
    if not m:
        continue
    pct, dso, kind, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
    if kind == "k":
        group = next((name for name, keys in KERNEL if any(k in sym for k in keys)), "kernel: other")
    elif dso.endswith(".cwasm") or dso.startswith("[JIT") or dso.startswith("["):
        group = "the plugin's compiled code" if dso.endswith(".cwasm") else dso
    elif dso.startswith("lib"):
        group = dso.split(".so")[0]
    else:
        name = re.sub(r"^[<&\s(]*(dyn |mut |impl )?", "", sym)
        group = name.split("::")[0] if "::" in name else ("mimalloc" if name.startswith(("mi_", "_mi_")) else "other")
        group = group.removeprefix("<")
    shares[group] += pct
for group, pct in shares.most_common():
    if pct >= 0.5:
        print(f"{pct:6.1f}%  {group}")
