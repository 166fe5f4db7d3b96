"""The workload: several tenants, each with chats that need approvals (decided
from any replica, or cancelled instead), `ask_human` answers, code-mode
programs with nested calls, direct calls and plugin uploads. Every request
and event goes to the history; the decisions are drawn per session from
the seed, so the same seed asks the same of each session."""

import json
import random
import threading
import time

# What each tenant's scripted model does in every chat: a small payment and
# a gated one side by side, then a question for the person, then a program
# whose two nested payments run one after the other, then the answer.
SMALL, BIG, NESTED = 100, 9000, (200, 300)


def script(ledger_url):
    call = lambda id, name, args: {"id": id, "name": name, "arguments": json.dumps(args)}
    program = (f"const a = await tools.pay({{url: {json.dumps(ledger_url)}, amount_cents: {NESTED[0]}}});\n"
               f"const b = await tools.pay({{url: {json.dumps(ledger_url)}, amount_cents: {NESTED[1]}}});\n"
               "return [a, b];")
    return [
        {"tool_calls": [call("small", "pay", {"url": ledger_url, "amount_cents": SMALL}),
                        call("big", "pay", {"url": ledger_url, "amount_cents": BIG})]},
        {"tool_calls": [call("ask", "ask_human", {"question": "Shall I go on?"})]},
        {"tool_calls": [call("prog", "run_code", {"code": program})]},
        {"text": "done"},
    ]


class Tenant:
    def __init__(self, name, uploads):
        self.name = name
        self.key = f"{name}-key"
        self.uploads = uploads


class Workload:
    def __init__(self, seed, client, replicas, tenants, stop_at, chats_per_tenant, upload_wasm, history):
        self.seed = seed
        self.client = client
        self.replicas = replicas
        self.tenants = tenants
        self.stop_at = stop_at
        self.chats_per_tenant = chats_per_tenant
        self.upload_wasm = upload_wasm
        self.history = history
        self.counter = 0
        self.lock = threading.Lock()
        self.latencies = []  # (finished at, seconds) of direct calls

    def pick(self, rng, avoid=None):
        """A replica to send to: any that is not known dead, preferring
        one other than `avoid`. A stopped one may be picked: clients do
        not know."""
        live = [r for r in self.replicas if r.alive()]
        others = [r for r in live if r is not avoid] or live or self.replicas
        return rng.choice(others)

    def next_session(self, tenant):
        with self.lock:
            self.counter += 1
            return f"{tenant.name}-s{self.counter}"

    def threads(self):
        out = []
        for tenant in self.tenants:
            work = [(self.chats, (tenant, worker)) for worker in range(self.chats_per_tenant)]
            work.append((self.direct_calls, (tenant,)))
            if tenant.uploads:
                work.append((self.upload, (tenant,)))
            for target, args in work:
                out.append(threading.Thread(target=self.reporting, args=(target, args), daemon=True))
        return out

    def reporting(self, target, args):
        """Runs a worker; its failure is a line of the history (a
        violation), not a thread that ends in silence."""
        try:
            target(*args)
        except Exception as e:  # noqa: BLE001 - any failure is reported
            self.history.write("worker_error", worker=target.__name__, error=f"{type(e).__name__}: {e}")

    # chats ------------------------------------------------------------------

    def chats(self, tenant, worker):
        while time.time() < self.stop_at:
            self.chat(tenant, self.next_session(tenant))

    def chat(self, tenant, session):
        rng = random.Random(f"{self.seed}/{session}")
        roll = rng.random()
        # What the person does with the gated payment, the same each time
        # it is asked (again, after a takeover).
        choice = "cancel" if roll < 0.15 else "deny" if roll < 0.40 else "approve"
        self.history.write("chat", tenant=tenant.name, session=session, choice=choice)
        body = json.dumps({"session_id": session, "input": "go"})
        attach = json.dumps({"session_id": session})
        replica = self.pick(rng)
        sent_input = False
        last_id = None
        deadline = time.time() + 600
        while time.time() < deadline:
            first = not sent_input
            ended = None
            # A stream silent for 8 s is left (the keep-alive is 30 s): what
            # waits on the person is then read from the lists below.
            for name, id, data in self.client.stream(replica, session, tenant.key,
                                                     body if first else attach, last_id, idle=8.0):
                if name == "http_status":
                    # 409: the input is stored and a run is going (an
                    # earlier send whose answer was lost): attach to it.
                    if id == 409:
                        sent_input = True
                    break
                sent_input = True
                if id is not None and name != "replay_truncated":
                    last_id = id
                if name == "approval_required" and data.get("id") == "big":
                    self.decide(rng, tenant, session, replica, choice)
                elif name == "question":
                    self.answer(rng, tenant, session, replica)
                elif name == "run_completed":
                    ended = "completed"
                    break
                elif name == "error" and isinstance(data, dict) and (data.get("fatal") or
                                                                     data.get("type") == "handed_over"):
                    # The run stopped here (its store failed, its replica
                    # lost it): the run's state below says what follows.
                    self.history.write("chat_error", tenant=tenant.name, session=session, error=data)
                    break
            if ended:
                self.history.write("chat_end", tenant=tenant.name, session=session, how=ended)
                return
            # The stream ended or broke: the run's state decides.
            status = self.status(rng, tenant, session)
            if status in ("completed", "failed", "interrupted", "cancelled"):
                self.history.write("chat_end", tenant=tenant.name, session=session, how=status)
                return
            if status is None:
                # The replica died before it saved the input (or never
                # answered): send the input again, as a client would.
                sent_input = False
            elif status == "running":
                # An approval or a question asked while no stream of this
                # replica's was attached, or on another replica's.
                self.open_work(tenant, session, rng, choice)
            time.sleep(0.3)
            replica = self.pick(rng, avoid=replica)
        self.history.write("chat_end", tenant=tenant.name, session=session, how="gave up after 600 s")

    def status(self, rng, tenant, session):
        """The session's status as the store has it, None when it has none."""
        for _ in range(5):
            r = self.pick(rng)
            code, text = self.client.request(r, "GET", f"/api/chat/{session}", tenant.key)
            if code == 200:
                return json.loads(text).get("status")
            if code == 404:
                return None
            time.sleep(0.5)
        return "unknown"

    def open_work(self, tenant, session, rng, choice):
        """Decides an approval and answers a question of the session that
        wait on the person, as the lists of any replica show them."""
        r = self.pick(rng)
        code, text = self.client.request(r, "GET", "/api/approvals", tenant.key)
        if code == 200:
            for a in json.loads(text).get("approvals", []):
                if a.get("session_id") == session and a.get("call_id") == "big":
                    self.decide(rng, tenant, session, r, choice)
        code, text = self.client.request(r, "GET", "/api/questions", tenant.key)
        if code == 200:
            for q in json.loads(text).get("questions", []):
                if q.get("session_id") == session:
                    self.answer(rng, tenant, session, r)

    def decide(self, rng, tenant, session, stream_replica, choice):
        target = self.pick(rng, avoid=stream_replica)
        for _ in range(10):
            if choice == "cancel":
                code, _ = self.client.request(target, "POST", "/api/chat/cancel", tenant.key,
                                              json.dumps({"session_id": session}))
            else:
                code, _ = self.client.request(target, "POST", "/api/chat/approve", tenant.key, json.dumps(
                    {"session_id": session, "call_id": "big", "decision": choice}))
            if code in (200, 202, 404):
                return
            time.sleep(0.3)
            target = self.pick(rng, avoid=target)

    def answer(self, rng, tenant, session, stream_replica):
        target = self.pick(rng, avoid=stream_replica)
        for _ in range(10):
            code, _ = self.client.request(target, "POST", "/api/chat/answer", tenant.key,
                                          json.dumps({"session_id": session, "answer": "yes"}))
            if code in (200, 202, 404):
                return
            time.sleep(0.3)
            target = self.pick(rng, avoid=target)

    # direct calls and uploads ----------------------------------------------

    def direct_calls(self, tenant):
        rng = random.Random(f"{self.seed}/{tenant.name}/direct")
        n = 0
        while time.time() < self.stop_at:
            n += 1
            call_id = f"{tenant.name}-d{n}"
            replica = self.pick(rng)
            started = time.time()
            code, text = self.client.request(
                replica, "POST", "/api/tools/pay/call", tenant.key,
                json.dumps({"url": self.ledger_url(tenant), "amount_cents": SMALL}),
                headers={"x-lovia-call-id": call_id})
            if code == 200:
                with self.lock:
                    self.latencies.append((time.time(), time.time() - started))
            time.sleep(rng.uniform(0.1, 0.4))

    def ledger_url(self, tenant):
        return f"{self.ledger_base}/effect/{tenant.name}"

    def upload(self, tenant):
        """Uploads the plugin once, at a time drawn from the seed, and again
        until a replica says it is stored (201, or 409 when an earlier try
        whose answer was lost had stored it)."""
        rng = random.Random(f"{self.seed}/{tenant.name}/upload")
        time.sleep(rng.uniform(1, max(2, (self.stop_at - time.time()) / 2)))
        with open(self.upload_wasm, "rb") as f:
            wasm = f.read()
        while time.time() < self.stop_at + 60:
            replica = self.pick(rng)
            code, text = self.client.request(replica, "POST", "/api/plugins", tenant.key, wasm,
                                             headers={"content-type": "application/wasm"}, timeout=120)
            if code == 201 or (code == 409 and "conflict" in text):
                self.history.write("uploaded", tenant=tenant.name, status=code)
                return
            time.sleep(1)
