"""The workload's HTTP client and its history: every request and response,
and every event of every chat stream, as JSON lines the checker reads."""

import http.client
import json
import threading
import time


class History:
    """An append-only JSON-lines file; every line has `at` (Unix seconds)."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.file = open(path, "a", buffering=1)

    def write(self, kind, **fields):
        line = json.dumps({"at": time.time(), "kind": kind, **fields})
        with self.lock:
            self.file.write(line + "\n")


class Client:
    def __init__(self, history):
        self.history = history

    def request(self, replica, method, path, key=None, body=None, headers=None, timeout=15.0, log=True):
        """(status, body text), or (None, error) when the replica did not answer."""
        all_headers = dict(headers or {})
        if key:
            all_headers["authorization"] = f"Bearer {key}"
        data = body.encode() if isinstance(body, str) else body
        if data is not None:
            all_headers.setdefault("content-type", "application/json")
        sent = time.time()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", replica.port, timeout=timeout)
            conn.request(method, path, body=data, headers=all_headers)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
            conn.close()
            status = response.status
        except (OSError, http.client.HTTPException) as e:
            status, text = None, f"{type(e).__name__}: {e}"
        if log:
            self.history.write("http", sent=sent, replica=replica.name, method=method, path=path,
                               request=body if isinstance(body, str) else None,
                               headers={k: v for k, v in all_headers.items() if k.startswith("x-")},
                               status=status, response=text[:2000])
        return status, text

    def stream(self, replica, session, key, body, last_id=None, idle=20.0):
        """Opens a chat stream; yields (name, id, data) per event, logging
        each. Ends when the stream ends, breaks or is silent for `idle`
        seconds (keep-alive comments count as traffic)."""
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json",
                   "accept": "text/event-stream"}
        if last_id is not None:
            headers["last-event-id"] = str(last_id)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", replica.port, timeout=idle)
            conn.request("POST", "/api/chat", body=body.encode(), headers=headers)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            self.history.write("stream", replica=replica.name, session=session, request=body,
                               status=None, response=f"{type(e).__name__}: {e}")
            return
        if response.status != 200:
            text = response.read().decode("utf-8", "replace")
            self.history.write("stream", replica=replica.name, session=session, request=body,
                               status=response.status, response=text[:2000])
            conn.close()
            yield ("http_status", response.status, text)
            return
        self.history.write("stream", replica=replica.name, session=session, request=body, status=200)
        name, id, data = None, None, []
        try:
            while True:
                line = response.readline()
                if not line:
                    break
                line = line.decode("utf-8", "replace").rstrip("\r\n")
                if line == "":
                    if name is not None:
                        text = "\n".join(data)
                        try:
                            parsed = json.loads(text) if text else None
                        except ValueError:
                            parsed = text
                        self.history.write("event", replica=replica.name, session=session,
                                           name=name, id=id, data=parsed)
                        yield (name, id, parsed)
                    name, id, data = None, None, []
                elif line.startswith(":"):
                    continue
                elif line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("id:"):
                    id = line[3:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" ") if line.startswith("data: ") else line[5:])
        except (OSError, http.client.HTTPException) as e:
            self.history.write("stream_end", replica=replica.name, session=session,
                               reason=f"{type(e).__name__}: {e}")
            conn.close()
            return
        self.history.write("stream_end", replica=replica.name, session=session, reason="closed")
        conn.close()
