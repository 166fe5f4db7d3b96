"""The reference implementation (`pip install lovia`) doing the work of
`lovia bench`'s overhead (a) and timeout (e) figures, and the side-by-side
table. Run by bench/run; by hand:

    python bench/reference.py --calls 200 --json > reference.json
    python bench/reference.py --compare ours.json reference.json
"""

import argparse
import asyncio
import json
import statistics
import sys
import time


def measure(calls: int) -> dict:
    from lovia import Agent, Runner, tool
    from lovia.testing import ScriptedProvider, batch, call, text

    @tool
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @tool(timeout=0.05)
    def spin_ms(ms: int) -> str:
        """Busy-loop for ms milliseconds (a sync tool: it runs in a worker thread)."""
        end = time.perf_counter() + ms / 1000
        n = 0
        while time.perf_counter() < end:
            n += 1
        return f"spun {n}"

    async def run(script) -> float:
        agent = Agent(name="bench", model=ScriptedProvider(script), tools=[echo, spin_ms])
        start = time.perf_counter()
        await Runner.run(agent, "go")
        return time.perf_counter() - start

    async def overhead() -> dict:
        turn = lambda: [batch(*[("echo", {"text": "hi"})] * calls), text("done")]
        for _ in range(5):
            await run(turn())
        full = statistics.median([await run(turn()) for _ in range(25)])
        # The same run without the tool turn: what is left is the turn's tool work.
        empty = statistics.median([await run([text("done")]) for _ in range(25)])
        return {"calls": calls, "turn_ms": (full - empty) * 1e3, "us_per_call": (full - empty) * 1e6 / calls}

    async def timeout() -> dict:
        idle_before = time.process_time()
        await asyncio.sleep(1)
        idle = time.process_time() - idle_before
        # The tool spins for 3 s; its timeout is 50 ms.
        returned = await run([call("spin_ms", {"ms": 3000}), text("done")])
        before = time.process_time()
        await asyncio.sleep(1)
        after = time.process_time() - before
        return {
            "timeout_ms": 50,
            "returned_after_ms": returned * 1e3,
            "cpu_ms_in_next_second": after * 1e3,
            "idle_cpu_ms_per_second": idle * 1e3,
        }

    async def main() -> dict:
        import lovia
        from importlib.metadata import version
        return {"reference": f"lovia {version('lovia')} (Python {sys.version.split()[0]})",
                "overhead": await overhead(), "timeout": await timeout()}

    return asyncio.run(main())


def compare(ours_path: str, ref_path: str) -> str:
    ours = json.load(open(ours_path))
    ref = json.load(open(ref_path))
    m = ours["machine"]
    fresh = next(o for o in ours["overhead"] if o["mode"] == "fresh")
    session = next(o for o in ours["overhead"] if o["mode"] == "session")
    r = ref["overhead"]
    rows = [
        ("per-call overhead, 200-call turn (µs/call)", f"{fresh['us_per_call']:.1f} fresh / {session['us_per_call']:.1f} session",
         f"{r['us_per_call']:.1f}", f"{r['us_per_call'] / fresh['us_per_call']:.1f}× / {r['us_per_call'] / session['us_per_call']:.1f}×"),
        ("turn of 200 calls (ms)", f"{fresh['turn_ms']:.2f} / {session['turn_ms']:.2f}", f"{r['turn_ms']:.2f}", ""),
        ("50 ms timeout: call returned after (ms)", f"{ours['timeout']['returned_after_ms']:.1f}",
         f"{ref['timeout']['returned_after_ms']:.1f}", "(reference: whole run)"),
        ("CPU in the second after it returned (ms)", f"{ours['timeout']['cpu_ms_in_next_second']:.0f}",
         f"{ref['timeout']['cpu_ms_in_next_second']:.0f}", ""),
    ]
    out = [f"side by side on {m['cpus']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB; reference: {ref['reference']}",
           f"{'':44} {'lovia':>24} {'reference':>10}  ratio (reference / lovia)"]
    out += [f"{name:44} {a:>24} {b:>10}  {c}" for name, a, b, c in rows]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=200, help="echo calls in the overhead turn (default 200)")
    p.add_argument("--compare", nargs=2, metavar=("OURS_JSON", "REFERENCE_JSON"),
                   help="print the side-by-side table from two JSON reports")
    args = p.parse_args()
    if args.compare:
        sys.stdout.write(compare(*args.compare))
    else:
        print(json.dumps(measure(args.calls), indent=2))
