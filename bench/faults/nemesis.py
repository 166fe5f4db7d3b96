"""The faults: a schedule drawn from the seed, then applied one fault at a
time, each followed by the time the service took to answer health checks
again and, for a replica killed or frozen, the time each of its runs took
to be taken over."""

import os
import random
import subprocess
import threading
import time

KINDS = ["kill", "stop", "pg-fast", "pg-immediate", "cut", "delay", "disk"]

# How long after a fault is healed every replica must answer /readyz
# again, in seconds (the checker's bound; docs/replicas.md, "Faults").
HEALTH_BOUND = 20.0


def schedule(seed, kinds, seconds, replicas, lease_ms):
    """The faults of a run: (at, kind, replica, seconds it lasts, detail),
    `at` from the run's start. The same seed and arguments give the same
    list; only the workload's timing around it differs between runs."""
    rng = random.Random(seed)
    out = []
    at = 5.0
    end = seconds - 15
    while kinds:
        kind = rng.choice(kinds)
        target = rng.randrange(replicas)
        if kind == "kill":
            lasts, detail = rng.uniform(1, 6), None
        elif kind == "stop":
            lasts, detail = lease_ms / 1000 + rng.uniform(0.5, 3), None
        elif kind in ("pg-fast", "pg-immediate"):
            lasts, detail, target = 0.0, None, None
        elif kind == "cut":
            lasts, detail = rng.uniform(0.5, 5), None
        elif kind == "delay":
            lasts, detail = rng.uniform(2, 8), rng.choice([50, 200, 500, 1500])
        else:  # disk
            lasts, detail = rng.uniform(2, 8), None
        if at + lasts > end:
            break
        out.append({"at": round(at, 3), "kind": kind, "replica": target, "lasts": round(lasts, 3),
                    "delay_ms": detail})
        at += lasts + rng.uniform(3, 8)
    return out


class Nemesis:
    def __init__(self, plan, started, replicas, proxies, pg, history, lease_ms, poll_ms, renew_ms):
        self.plan = plan
        self.started = started
        self.replicas = replicas
        self.proxies = proxies
        self.pg = pg
        self.history = history
        self.lease_ms = lease_ms
        self.poll_ms = poll_ms
        self.renew_ms = renew_ms
        self.watchers = []
        self.done = threading.Event()
        self.stop_after = float("inf")

    def run(self):
        for fault in self.plan:
            # A schedule that fell behind (a replica that never became
            # ready again holds each health check for its whole bound)
            # stops where the workload does: the store is read after.
            if time.time() > self.started + self.stop_after:
                self.history.write("nemesis_behind", skipped=fault["kind"])
                break
            wait = self.started + fault["at"] - time.time()
            if wait > 0:
                time.sleep(wait)
            try:
                self.apply(fault)
            except Exception as e:  # noqa: BLE001 - any failure is reported, and the run goes on
                # A fault that could not be applied or healed (pg_ctl failed,
                # psql timed out) is a failed run, not a silent one.
                self.history.write("nemesis_error", fault=fault["kind"], error=f"{type(e).__name__}: {e}")
        self.done.set()

    def apply(self, fault):
        kind, lasts = fault["kind"], fault["lasts"]
        replica = self.replicas[fault["replica"]] if fault["replica"] is not None else None
        name = replica.name if replica else "postgres"
        self.history.write("fault", fault=kind, target=name, lasts=lasts, delay_ms=fault["delay_ms"])
        print(f"  {time.time() - self.started:7.1f} s  {kind:<12} {name:<8} {lasts:5.1f} s", flush=True)
        if kind == "kill":
            before = self.leases()
            replica.kill()
            self.watch(replica, before)
            time.sleep(lasts)
            replica.start()
        elif kind == "stop":
            before = self.leases()
            replica.pause()
            self.watch(replica, before)
            time.sleep(lasts)
            replica.resume()
        elif kind in ("pg-fast", "pg-immediate"):
            self.pg.restart("fast" if kind == "pg-fast" else "immediate")
        elif kind == "cut":
            self.proxies[fault["replica"]].cut_all()
            time.sleep(lasts)
            self.proxies[fault["replica"]].heal()
        elif kind == "delay":
            self.proxies[fault["replica"]].delay = fault["delay_ms"] / 1000
            time.sleep(lasts)
            self.proxies[fault["replica"]].heal()
        elif kind == "disk":
            filler = fill(replica.scratch)
            time.sleep(lasts)
            os.unlink(filler)
        self.history.write("healed", fault=kind, target=name)
        self.health(kind, name)

    def health(self, kind, name):
        healed = time.time()
        while True:
            waiting = [r.name for r in self.replicas if not r.ready()]
            took = time.time() - healed
            if not waiting:
                self.history.write("healthy", fault=kind, target=name, seconds=round(took, 3))
                return
            if took > HEALTH_BOUND + 30:
                self.history.write("unhealthy", fault=kind, target=name, seconds=round(took, 3),
                                   waiting=waiting)
                return
            time.sleep(0.1)

    def leases(self):
        """{(tenant, session): (owner, epoch, expires)} of the leases now."""
        try:
            rows = self.pg.psql("SELECT tenant, session, owner, epoch, extract(epoch FROM expires) "
                                "FROM lovia_run_leases")
        except (RuntimeError, subprocess.TimeoutExpired):
            return {}
        return {(r[0], r[1]): (r[2], r[3], r[4]) for r in rows}

    def watch(self, replica, before):
        """Times the takeover of each run the silenced replica held."""
        t = threading.Thread(target=self.takeovers, args=(replica, before, time.time()), daemon=True)
        self.watchers.append(t)
        t.start()

    def takeovers(self, replica, before, at):
        # The silenced replica's leases are those whose expiry stops moving:
        # the others' owners renew theirs every renew_ms.
        time.sleep(self.renew_ms * 3 / 1000)
        first = self.leases()
        time.sleep(self.renew_ms * 2 / 1000)
        second = self.leases()
        held = [k for k, v in second.items() if first.get(k) == v and before.get(k, (None,))[0] == v[0]]
        limit = at + (self.lease_ms + self.poll_ms) / 1000 + 30
        pending = {k: second[k][1] for k in held}
        while pending and time.time() < limit:
            # Taken over: a lease of another epoch, or the run no longer
            # running (its lease row alone may just have been released by
            # a replica that found its fence had ended).
            try:
                rows = self.pg.psql("SELECT r.tenant, r.session, r.status, l.epoch FROM lovia_runs r "
                                    "LEFT JOIN lovia_run_leases l USING (tenant, session)")
            except (RuntimeError, subprocess.TimeoutExpired):
                rows = []
            now = {(r[0], r[1]): (r[2], r[3]) for r in rows}
            for k, epoch in list(pending.items()):
                if k in now and (now[k][0] != "running" or now[k][1] not in ("", epoch)):
                    self.history.write("takeover", target=replica.name, tenant=k[0], session=k[1],
                                       seconds=round(time.time() - at, 3), status=now[k][0])
                    del pending[k]
            time.sleep(0.1)
        for k in pending:
            self.history.write("takeover", target=replica.name, tenant=k[0], session=k[1], seconds=None)


def fill(dir):
    """Fills the file system of `dir` (the replica's temporary files and
    artifact cache, a tmpfs of its own) to the last block; returns the
    filler's path."""
    path = os.path.join(dir, "filler")
    with open(path, "wb") as f:
        free = os.statvfs(dir).f_bavail * os.statvfs(dir).f_frsize
        try:
            os.posix_fallocate(f.fileno(), 0, max(free, 1))
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return path
