"""The pieces the fault run starts and breaks: a throwaway PostgreSQL server,
a fault-injecting TCP proxy per replica, the ledger (the outside recorder
of effects) and the `lovia serve` replicas.

Standard library only, so that the run needs nothing beyond python3 and
what scripts/test provides (PostgreSQL's initdb, pg_ctl and psql).
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin(name):
    """initdb, pg_ctl and psql: on PATH, or where Debian keeps them."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(
        (d for d in os.listdir("/usr/lib/postgresql") if d.isdigit()), key=int
    ) if os.path.isdir("/usr/lib/postgresql") else []
    for v in reversed(versions):
        path = f"/usr/lib/postgresql/{v}/bin/{name}"
        if os.path.exists(path):
            return path
    raise SystemExit(
        f"fault-run: no {name}; install PostgreSQL (as root: apt-get install postgresql)"
    )


# Podman as root on this project's test machines: runc (crun refuses their
# cgroup v1 hybrid mode) and rlimits below podman's defaults, which the
# kernel refuses to raise (scripts/image).
PODMAN = ["podman", "--runtime", "runc"]
LIMITS = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096"]


class Postgres:
    """A server of its own, on a loopback TCP port (the proxies forward to
    it), restarted by the faults. As root it runs as the `postgres` user.
    With `image`, it runs in a container of that image (PostgreSQL 15 at
    Debian's paths, scripts/image --postgres) on the host's network, and
    pg_ctl runs inside it, so a restart restarts the server, not the
    container."""

    def __init__(self, dir, image=None):
        self.dir = dir
        self.port = free_port()
        self.container = f"lovia-faults-pg-{self.port}" if image else None
        os.makedirs(dir, exist_ok=True)
        if image:
            self.data = "/var/lib/postgresql/faults"
            self.sockets = "/tmp"
            subprocess.run(PODMAN + ["run", "-d", "--rm", "--name", self.container, "--network", "host"] + LIMITS +
                           ["--user", "postgres", "--entrypoint", "sleep", image, "infinity"],
                           check=True, capture_output=True)
            self.as_pg = PODMAN + ["exec", self.container]
            self.bin = lambda name: f"/usr/lib/postgresql/15/bin/{name}"
        else:
            self.data = os.path.join(dir, "data")
            self.sockets = dir
            self.as_pg = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
            self.bin = pg_bin
            if os.getuid() == 0:
                shutil.chown(dir, "postgres")
        out = subprocess.run(
            self.as_pg + [self.bin("initdb"), "-D", self.data, "-A", "trust", "-U", "lovia"],
            capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"fault-run: initdb failed: {out.stderr[-2000:]}")
        self.ctl("start")
        self.psql("CREATE DATABASE faults", db="postgres")

    def ctl(self, action, mode="fast"):
        options = (f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
                   "-c max_connections=300 -c fsync=off")
        log = os.path.join(self.sockets if self.container else self.dir, "log")
        out = subprocess.run(
            self.as_pg + [self.bin("pg_ctl"), "-D", self.data, "-o", options, "-l", log, "-m", mode, "-w",
                          action],
            capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"pg_ctl {action} -m {mode}: {out.stdout}{out.stderr}")

    def restart(self, mode):
        self.ctl("restart", mode)

    def psql(self, sql, db="faults"):
        """Rows of `sql` as lists of strings (direct, not through a proxy)."""
        out = subprocess.run(
            [pg_bin("psql"), "-X", "-q", "-At", "-F", "\x1f", "-h", "127.0.0.1", "-p", str(self.port),
             "-U", "lovia", "-d", db, "-c", sql],
            capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"psql: {out.stderr.strip()}")
        return [line.split("\x1f") for line in out.stdout.splitlines() if line]

    def stop(self):
        if self.container:
            subprocess.run(PODMAN + ["kill", self.container], capture_output=True)
            return
        try:
            self.ctl("stop", "immediate")
        except RuntimeError:
            pass


class Proxy:
    """A TCP proxy between one replica and PostgreSQL that can cut every
    connection (and refuse new ones) or delay every byte. No toxiproxy:
    it is a Go program, and neither it nor a Go module proxy can be had on
    the machines this runs on (docs/replicas.md, "Faults")."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.open = set()
        self.cut = False
        self.delay = 0.0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                # Out of descriptors for a moment, say: the proxy goes on.
                time.sleep(0.05)
                continue
            if self.cut:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self.lock:
                self.open.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    def pipe(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.delay:
                    time.sleep(self.delay)
                if self.cut:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            self.close(s)

    def close(self, s):
        with self.lock:
            self.open.discard(s)
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()

    def cut_all(self):
        self.cut = True
        with self.lock:
            sockets = list(self.open)
        for s in sockets:
            self.close(s)

    def heal(self):
        self.cut = False
        self.delay = 0.0


class Ledger:
    """The outside recorder: the payments `pay` (the ledger fixture) POSTs
    to `/effect/<tenant>`. Every delivery is recorded with its tenant, its
    headers' session and idempotency key, and the time it arrived. A key
    seen before is applied once: its delivery is answered with the number
    the first one got (`paid <n>`), as an idempotent receiver does."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.by_key = {}
        self.count = 0
        self.file = open(path, "a", buffering=1)
        ledger = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.body().decode("utf-8", "replace")
                parts = self.path.strip("/").split("/")
                tenant = parts[1] if len(parts) == 2 and parts[0] == "effect" else None
                key = self.headers.get("idempotency-key")
                session = self.headers.get("x-lovia-session")
                if tenant is None or not key:
                    answer, status = b"a delivery needs /effect/<tenant> and an idempotency-key", 400
                else:
                    with ledger.lock:
                        first = key not in ledger.by_key
                        if first:
                            ledger.count += 1
                            ledger.by_key[key] = ledger.count
                        number = ledger.by_key[key]
                        ledger.file.write(json.dumps({
                            "at": time.time(), "tenant": tenant, "session": session, "key": key,
                            "amount": body, "number": number, "first": first}) + "\n")
                    answer, status = f"paid {number}".encode(), 200
                self.send_response(status)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def body(self):
                """The whole request body, sized or chunked (wasi:http sends
                a body of unknown length chunked); read before answering, or
                its rest would be taken for the next request."""
                if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
                    data = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return data
                        data += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("content-length") or 0))

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                # A killed replica's connection resets under a read: expected.
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Replica:
    """One `lovia serve` process on a fixed port (kept across restarts),
    its store reached through its own proxy, its temporary files and
    artifact cache on a directory the disk fault fills. With `image`, the
    process runs in a container of that image (deploy/Dockerfile, built by
    scripts/image) on the host's network, with the run's files mounted at
    the same paths; its signals go through podman."""

    def __init__(self, index, lovia, config, dir, store_url, flags, image=None, mounts=()):
        self.index = index
        self.name = f"r{index}"
        self.lovia = lovia
        self.config = config
        self.dir = dir
        self.store_url = store_url
        self.flags = flags
        self.image = image
        self.mounts = mounts
        self.port = free_port()
        self.container = f"lovia-faults-{self.name}-{self.port}"
        self.proc = None
        self.stopped = False
        self.scratch = os.path.join(dir, "scratch")
        os.makedirs(self.scratch, exist_ok=True)
        self.log = open(os.path.join(dir, "serve.log"), "ab")

    def start(self):
        for sub in ("tmp", "cache"):
            path = os.path.join(self.scratch, sub)
            os.makedirs(path, exist_ok=True)
            # lovia refuses a cache directory others may write to; in a
            # container the image's own user must own it.
            os.chmod(path, 0o700)
            if self.image:
                os.chown(path, self.image_uid(), -1)
        env = {"TMPDIR": os.path.join(self.scratch, "tmp"),
               "LOVIA_CACHE_DIR": os.path.join(self.scratch, "cache"), "RUST_LOG": "warn"}
        serve = ["serve", "--config", self.config, "--listen", f"127.0.0.1:{self.port}",
                 "--store", self.store_url] + self.flags
        if self.image:
            volumes = []
            for path in list(self.mounts) + [self.scratch]:
                volumes += ["-v", f"{path}:{path}"]
            envs = []
            for k, v in env.items():
                envs += ["-e", f"{k}={v}"]
            command = PODMAN + ["run", "--rm", "--replace", "--name", self.container, "--network", "host"] + LIMITS + \
                volumes + envs + [self.image] + serve
            self.proc = subprocess.Popen(command, stdout=self.log, stderr=self.log)
        else:
            self.proc = subprocess.Popen([self.lovia] + serve, stdout=self.log, stderr=self.log,
                                         env=dict(os.environ, **env))
        self.stopped = False

    def image_uid(self):
        """The user id the image's process runs as."""
        if not hasattr(self, "_uid"):
            out = subprocess.run(PODMAN + ["run", "--rm"] + LIMITS + ["--entrypoint", "id", self.image, "-u"],
                                 capture_output=True, text=True, check=True)
            self._uid = int(out.stdout.strip())
        return self._uid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.image:
            subprocess.run(PODMAN + ["kill", "-s", sig.name.removeprefix("SIG"), self.container],
                           capture_output=True)
        else:
            self.proc.send_signal(sig)

    def kill(self):
        if self.alive():
            self.signal(signal.SIGKILL)
            self.proc.wait()

    def pause(self):
        self.signal(signal.SIGSTOP)
        self.stopped = True

    def resume(self):
        self.signal(signal.SIGCONT)
        self.stopped = False

    def ready(self, timeout=2.0):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            conn.request("GET", "/readyz")
            response = conn.getresponse()
            body = response.read()
            conn.close()
            return response.status == 200 and body == b"ready\n"
        except (OSError, http.client.HTTPException):
            return False

    def pid(self):
        if not self.image:
            return self.proc.pid
        out = subprocess.run(PODMAN + ["inspect", "-f", "{{.State.Pid}}", self.container],
                             capture_output=True, text=True)
        return int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip().isdigit() else None

    def resources(self):
        """(resident KiB, open descriptors) of the process."""
        pid = self.pid()
        try:
            with open(f"/proc/{pid}/status") as f:
                rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            return rss, fds
        except (OSError, StopIteration, TypeError):
            return None, None
