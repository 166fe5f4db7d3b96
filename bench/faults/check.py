"""The checker of a fault run: reads the history the run kept (the ledger's
deliveries as the outside recorder saw them, every request, response and
event of the workload, the run store at the end, the faults) and returns
every violation of the guarantees docs/replicas.md ("Faults") states, each
with its run, its call and the faults around it."""

import json
import os
import re
from collections import Counter, defaultdict

from nemesis import HEALTH_BOUND

PAID = re.compile(r"paid (\d+)")
# Past the lease and a poll, what a takeover may take on a loaded machine.
TAKEOVER_MARGIN = 10.0


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Run:
    """What the checker knows of one run."""

    def __init__(self, tenant, session, choice):
        self.tenant = tenant
        self.session = session
        self.choice = choice
        self.store = None
        self.cancelled_at = None
        self.cancel_accepted = False
        # When an approval was first sent, whatever its answer: one whose
        # replica died before answering may still have been applied.
        self.approve_sent_at = None
        self.chat_end = None
        self.chat_end_at = None


def check(out):
    plan = json.load(open(os.path.join(out, "schedule.json")))
    history = lines(os.path.join(out, "history.jsonl"))
    deliveries = lines(os.path.join(out, "ledger.jsonl"))
    store = lines(os.path.join(out, "store.jsonl"))
    lease_s, poll_s = plan["lease_ms"] / 1000, plan["poll_ms"] / 1000
    faults = [e for e in history if e["kind"] in ("fault", "healed")]
    violations = []

    def around(at):
        """The faults within 15 s of `at`, as text."""
        near = [f"{f['kind']} {f['fault']} {f['target']} at {f['at'] - at:+.1f} s"
                for f in faults if abs(f["at"] - at) < 15]
        return "; ".join(near) or "no fault within 15 s"

    def violation(what, at, **where):
        violations.append({"what": what, "faults": around(at) if at else "", **where})

    # The runs the workload started, and what the person decided for each.
    runs = {}
    direct = {}
    for e in history:
        if e["kind"] == "chat":
            runs[(e["tenant"], e["session"])] = Run(e["tenant"], e["session"], e["choice"])
    by_session = {s: r for (t, s), r in runs.items()}
    for e in history:
        if e["kind"] == "http" and e["method"] == "POST" and e["request"]:
            try:
                body = json.loads(e["request"])
            except ValueError:
                body = {}
            run = by_session.get(body.get("session_id")) if isinstance(body, dict) else None
            # A cancel counts from its 200: one queued (202) stops the run
            # only when its owner next looks.
            if e["path"] == "/api/chat/cancel" and run and e["status"] in (200, 202):
                # Either answer is a promise that the run will not complete.
                run.cancel_accepted = True
                if e["status"] == 200 and run.cancelled_at is None:
                    run.cancelled_at = e["at"]
            elif e["path"] == "/api/chat/approve" and run and body.get("decision") == "approve":
                sent = e.get("sent", e["at"])
                run.approve_sent_at = sent if run.approve_sent_at is None else min(run.approve_sent_at, sent)
            elif e["path"] == "/api/tools/pay/call":
                call = e["headers"].get("x-lovia-call-id")
                direct[call] = e
        elif e["kind"] == "chat_end" and (e["tenant"], e["session"]) in runs:
            runs[(e["tenant"], e["session"])].chat_end = e["how"]
            runs[(e["tenant"], e["session"])].chat_end_at = e["at"]
    # When each call of each session first started (its `tool_call` event,
    # by the server's clock): a call in flight at a cancel may still land.
    started = {}
    for e in history:
        if e["kind"] == "event" and e["name"] == "tool_call" and isinstance(e["data"], dict):
            key = (e["session"], e["data"].get("id"))
            at = e["data"].get("at_ms", e["at"] * 1000) / 1000
            started[key] = min(started.get(key, at), at)
    in_flight_at_cancel = 0
    pending_unresolved = 0
    run_ids = {}
    for row in store:
        if row.get("lease"):
            continue
        run = runs.get((row["tenant"], row["session"]))
        if run is None:
            continue
        run.store = row
        if row["api_status"] == 200:
            run_ids[row["api"]["run_id"]] = run

    # The ledger's deliveries, by idempotency key, and each run's payments
    # (key -> number), by run id.
    by_key = defaultdict(list)
    for d in deliveries:
        by_key[d["key"]].append(d)
    paid_by_run = defaultdict(dict)
    for key, ds in by_key.items():
        paid_by_run[key.partition("/")[0]][key] = ds[0]["number"]
    redelivered = 0
    for key, ds in by_key.items():
        if len(ds) > 1:
            redelivered += len(ds) - 1
            first, last = ds[0]["at"], ds[-1]["at"]
            if not any(first - lease_s - 5 <= f["at"] <= last for f in faults):
                violation(f"delivered {len(ds)} times with no fault between the first and the last",
                          first, key=key)
    for d in deliveries:
        run_id, _, call = d["key"].partition("/")
        run = run_ids.get(run_id)
        served = by_session.get(d["session"])
        if run is None and served is not None and served.store and served.store["api_status"] == 200:
            # One input, one run: a payment of another run of the session is
            # one the checks below would not see. (A session the store did
            # not serve is a violation of its own, below.)
            violation("a payment from a run other than its session's stored one", d["at"],
                      session=d["session"], key=d["key"])
            continue
        if run is None and served is not None:
            continue
        if run is None:
            if call in direct or (d["session"] or "").startswith(f"{d['tenant']}-d"):
                continue
            if d["session"] and not d["session"].startswith(f"{d['tenant']}-"):
                violation(f"a delivery to tenant {d['tenant']}'s ledger names another tenant's session",
                          d["at"], key=d["key"], session=d["session"])
            continue
        if run.tenant != d["tenant"]:
            violation(f"a run of {run.tenant} paid into {d['tenant']}'s ledger", d["at"],
                      session=run.session, key=d["key"])
        if call == "big" and (run.approve_sent_at is None or d["at"] < run.approve_sent_at):
            violation("the gated payment was made before anybody sent its approval", d["at"],
                      session=run.session, choice=run.choice)
        if run.cancelled_at is not None and d["at"] > run.cancelled_at:
            if started.get((run.session, call), float("inf")) < run.cancelled_at:
                # Started before the cancel: its request may have left.
                in_flight_at_cancel += 1
            else:
                violation("a payment of a call started after the run was cancelled", d["at"],
                          session=run.session, call=call, after_s=round(d["at"] - run.cancelled_at, 3))
        if run.store and run.store["status"] != "running" and d["at"] > run.store["updated"]:
            violation("a payment after the run ended", d["at"], session=run.session, call=call,
                      after_s=round(d["at"] - run.store["updated"], 3))

    # Every run ends, and a completed run's transcript shows exactly its effects.
    statuses = Counter()
    for run in runs.values():
        row = run.store
        if row is None:
            violation("the workload started this chat and the store has no run of it", run.chat_end_at,
                      session=run.session, chat_end=run.chat_end)
            continue
        statuses[row["status"]] += 1
        if row["status"] not in ("completed", "interrupted", "failed"):
            violation(f"the run is {row['status']} after the workload ended", run.chat_end_at, session=run.session,
                      chat_end=run.chat_end)
            continue
        if run.cancel_accepted and row["status"] == "completed":
            violation("a run completed after its cancel was answered 200 or 202", None, session=run.session)
        if row["api_status"] != 200:
            violation(f"the session is not served (status {row['api_status']})", None, session=run.session)
            continue
        api = row["api"]
        cited = set()
        failed = set()
        for m in api.get("messages", []):
            if m.get("role") == "tool":
                content = m.get("content")
                text = content if isinstance(content, str) else json.dumps(content)
                cited.update(int(n) for n in PAID.findall(text))
                if m.get("is_error"):
                    failed.add(m.get("tool_call_id"))
        made = paid_by_run.get(api["run_id"], {})
        if "prog" in failed:
            # A program that failed (a nested call's error it did not
            # catch) reads as its error alone: the payments it made before
            # are the ledger's, not its transcript's.
            made = {k: n for k, n in made.items() if not k.partition("/")[2].startswith("prog/")}
        if row["status"] == "completed":
            keys = sorted(made)
            expected = (1 if "small" not in failed else 0) + (1 if run.choice == "approve" and "big" not in failed
                                                               else 0) + (2 if "prog" not in failed else 0)
            if len(made) != expected:
                violation(f"a completed run made {len(made)} payments, not {expected}", None,
                          session=run.session, keys=keys)
            if set(made.values()) != cited:
                violation("the transcript's payments are not the ledger's", None, session=run.session,
                          transcript=sorted(cited), ledger=sorted(made.values()))
        else:
            extra = set(made.values()) - cited
            # A run that stopped (cancelled, failed) may have made a payment
            # its transcript does not show only if it was in flight then:
            # after a cancel's 200, or as a call the store lists as pending
            # (no result; its effect unknown, a resume runs it again under
            # the same key). A program's nested calls are its own.
            pending = {c.get("id") for c in api.get("pending_calls", [])}
            for key, number in made.items():
                if number not in extra:
                    continue
                if key.partition("/")[2].partition("/")[0] in pending:
                    pending_unresolved += 1
                elif run.cancelled_at is None:
                    violation(f"an effect of a {row['status']} run its transcript does not show", None,
                              session=run.session, key=key)
        if run.choice in ("deny", "cancel") and any(k.endswith("/big") for k in made):
            violation(f"the gated payment was made though the person chose {run.choice}", None,
                      session=run.session)

    # Direct calls: never run again; an answered one names its delivery.
    direct_keys = defaultdict(list)
    for key, ds in by_key.items():
        _, _, call = key.partition("/")
        if call in direct:
            direct_keys[call] += ds
    for call, e in direct.items():
        ds = direct_keys.get(call, [])
        if len(ds) > 1:
            violation(f"a direct call was delivered {len(ds)} times", e["at"], call=call)
        if e["status"] == 200:
            body = json.loads(e["response"])
            if not body.get("is_error"):
                numbers = PAID.findall(body.get("output", ""))
                if not ds or [str(ds[0]["number"])] != numbers:
                    violation("a direct call's answer is not the ledger's", e["at"], call=call,
                              answer=body.get("output"), ledger=[d["number"] for d in ds])

    # Nothing of one tenant reaches another.
    for e in history:
        if e["kind"] == "probe":
            if e["what"] == "foreign session" and e["status"] != 404:
                violation(f"tenant {e['tenant']} read another tenant's session (status {e['status']})",
                          None, session=e["session"])
            if e["what"] == "echo":
                want = 200 if e["uploads"] else 404
                if e["status"] != want:
                    violation(f"tenant {e['tenant']}'s echo on {e['replica']} answered {e['status']}, "
                              f"not {want}", None)

    # Recovery: health after each fault, takeover of each silenced run.
    health = defaultdict(list)
    for e in history:
        if e["kind"] == "healthy":
            health[e["fault"]].append(e["seconds"])
            if e["seconds"] > HEALTH_BOUND:
                violation(f"ready again {e['seconds']} s after {e['fault']} of {e['target']} healed "
                          f"(bound {HEALTH_BOUND} s)", e["at"])
        elif e["kind"] == "unhealthy":
            violation(f"not ready {e['seconds']} s after {e['fault']} of {e['target']} healed: "
                      f"{', '.join(e['waiting'])}", e["at"])
    takeovers = []
    bound = lease_s + poll_s + TAKEOVER_MARGIN
    for e in history:
        if e["kind"] == "takeover":
            if e["seconds"] is None or e["seconds"] > bound:
                violation(f"a run of {e['target']} was not taken over within {bound:.1f} s", e["at"],
                          session=e["session"], seconds=e["seconds"])
            else:
                takeovers.append(e["seconds"])
    for e in history:
        if e["kind"] == "nemesis_error":
            violation(f"the fault {e['fault']} could not be applied or healed: {e['error']}", e["at"])
        if e["kind"] == "worker_error":
            violation(f"a workload thread failed: {e['error']}", e["at"])
    for e in history:
        if e["kind"] == "workload_end" and e["stuck_threads"]:
            violation(f"{e['stuck_threads']} workload threads never finished", e["at"])

    # A soak: nothing grows without bound. The samples of the first third
    # are the warm-up; the last must not be past twice the one after it.
    samples = [e for e in history if e["kind"] == "resources"]
    growth = {}
    if plan.get("soak") and len(samples) >= 3:
        base, last = samples[len(samples) // 3], samples[-1]
        for name, now in last["replicas"].items():
            then = base["replicas"].get(name, {})
            # Memory may settle after the warm-up, but not go on by half
            # again; descriptors are few, so they get slack.
            for what, factor, slack in (("rss_kib", 1.5, 0), ("fds", 2, 20)):
                if now.get(what) and then.get(what):
                    growth[f"{name} {what}"] = (then[what], now[what])
                    if now[what] > factor * then[what] + slack:
                        violation(f"{name}'s {what} grew from {then[what]} to {now[what]}", last["at"])
        if base["db_connections"] and last["db_connections"]:
            growth["db connections"] = (base["db_connections"], last["db_connections"])
            if last["db_connections"] > 2 * base["db_connections"] + 10:
                violation(f"database connections grew from {base['db_connections']} to "
                          f"{last['db_connections']}", last["at"])
        if base["p99_ms"] and last["p99_ms"]:
            growth["direct call p99 ms"] = (base["p99_ms"], last["p99_ms"])

    summary = {
        "growth": growth,
        "seed": plan["seed"],
        # The faults applied, not the planned ones.
        "faults": dict(Counter(e["fault"] for e in history if e["kind"] == "healed")),
        "runs": dict(statuses),
        "direct_calls": len(direct),
        "deliveries": len(deliveries),
        "effects": len(by_key),
        "redelivered": redelivered,
        "in_flight_at_cancel": in_flight_at_cancel,
        "pending_unresolved": pending_unresolved,
        "health_s": {k: (min(v), max(v)) for k, v in health.items()},
        "takeover_s": (min(takeovers), sorted(takeovers)[len(takeovers) // 2], max(takeovers))
        if takeovers else None,
        "takeovers": len(takeovers),
    }
    return violations, summary


def report(violations, summary):
    print(f"faults injected (seed {summary['seed']}): " +
          (", ".join(f"{k} {n}" for k, n in sorted(summary["faults"].items())) or "none"))
    print(f"runs checked: {sum(summary['runs'].values())} (" +
          ", ".join(f"{k} {n}" for k, n in sorted(summary["runs"].items())) + f"); direct calls "
          f"{summary['direct_calls']}")
    print(f"effects: {summary['effects']} payments from {summary['deliveries']} deliveries "
          f"({summary['redelivered']} sent again after a fault, same idempotency key, applied once; "
          f"{summary['in_flight_at_cancel']} of calls started before a cancel landed after its answer; "
          f"{summary.get('pending_unresolved', 0)} of stopped runs' calls listed as pending, in flight at the stop)")
    for kind, (lo, hi) in sorted(summary["health_s"].items()):
        print(f"ready again after {kind}: {lo:.2f}-{hi:.2f} s")
    if summary["takeover_s"]:
        lo, mid, hi = summary["takeover_s"]
        print(f"runs taken over: {summary['takeovers']}, in {lo:.2f} s (min), {mid:.2f} s (median), "
              f"{hi:.2f} s (max) after the fault")
    for what, (then, now) in sorted(summary["growth"].items()):
        print(f"soak: {what} {then} after the warm-up, {now} at the end")
    for v in violations:
        print("VIOLATION: " + json.dumps(v))
    print(f"fault run: {len(violations)} violations")
