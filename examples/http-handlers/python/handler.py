#!/usr/bin/env python3
# A dtq task handler in Python, standard library only: the delivery sidecar
# POSTs each task to it on localhost (docs/http-handlers.md has the contract).
#
# Task types:
#   greet    {"name": "Ada"} -> {"greeting": "hello, Ada"}, after reporting
#            the progress {"step": "greeting"} (a TaskProgress event)
#   receipt  {"order": "42"} -> sends a receipt once per order, however often
#            the task is redelivered: the sidecar's idempotent operation
#            guards the side effect.
# Every result carries the task's ID, attempt, idempotency key and flow key
# (the Dtq-Flow-Key header: "" for a task without one).
# Any type also honours these payload fields, so the examples' tests can
# drive every outcome of the contract:
#   "reject": "msg"           answer 400 {"error": msg} (dead letter, no retry)
#   "fail_first_attempt": true answer 500 on attempt 1 (retried with backoff)
#   "sleep": seconds          take that long (the sidecar cancels the request
#                             at the task's deadline)
#   "sleep_first_attempt": s  the same, on attempt 1 only
#   "key": "k"                append one execution line to $EXEC_LOG (the
#                             fault suite's witness) after the work
#   "die_after_effect": true  on attempt 1 of a receipt, SIGKILL this process
#                             right after the receipt was sent
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(os.environ.get("PORT", "8000"))
SIDECAR = os.environ.get("DTQ_SIDECAR_URL", "http://127.0.0.1:8081")
EXEC_LOG = os.environ.get("EXEC_LOG", "")
RECEIPT_LOG = os.environ.get("RECEIPT_LOG", "")
stopping = threading.Event()  # SIGTERM: finish open requests, close kept-alive connections


class Sidecar:
    """The sidecar's loopback API; token is the Dtq-Sidecar-Token of the task."""

    def __init__(self, token):
        self.token = token

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(SIDECAR + path, data=data, method=method,
                                     headers={"Dtq-Sidecar-Token": self.token, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return json.loads(raw) if raw else None

    def progress(self, task_id, value):
        """Reports progress (JSON, at most 1 KiB): the task's events show it.
        Best effort: a report that fails (the sidecar restarting, the task
        given up) must not fail the task."""
        try:
            self.call("POST", "/v1/tasks/%s/progress" % task_id, value)
        except (OSError, ValueError):
            pass

    def cancelled(self, task_id):
        return self.call("GET", "/v1/tasks/%s" % task_id)["cancelled"]

    def idempotent_operation(self, key, fn, deadline, ttl_seconds=86400):
        """Runs fn at most once per key among successful runs within the TTL.
        Returns (executed, result), like the Go SDK's IdempotentOperation.
        While another holder runs it, waits, but not past deadline (the
        task's, a Unix time): then raises TimeoutError."""
        while True:
            claim = self.call("POST", "/v1/operations/claim", {"key": key})
            if claim["state"] == "done":
                return False, claim.get("result")
            if claim["state"] == "acquired":
                break
            pause = min(claim.get("retryAfterMs", 100), 1000) / 1000.0
            if time.time() + pause >= deadline:
                raise TimeoutError("operation %s still running elsewhere at the task's deadline" % key)
            time.sleep(pause)
        try:
            result = fn()
        except Exception:
            self.call("POST", "/v1/operations/release", {"key": key, "token": claim["token"]})
            raise
        done = self.call("POST", "/v1/operations/finish",
                         {"key": key, "token": claim["token"], "result": result, "ttlMs": ttl_seconds * 1000})
        return True, done["result"]


def task_deadline(value):
    """The Dtq-Deadline header (RFC 3339, UTC) as a Unix time, to the second."""
    return datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def append_line(path, obj):
    # One write of one line on an O_APPEND file: concurrent writers never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(obj) + "\n").encode())
    finally:
        os.close(fd)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 5  # an idle kept-alive connection's thread ends (the sidecar closes its own after 4 s)

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, body):
        if stopping.is_set():
            self.close_connection = True  # let the connection's thread end
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/healthz":
            self.answer(200, {"ok": True})
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self):
        # Read the body before any answer: one left unread would prefix the
        # next request on this kept-alive connection.
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.path != "/tasks":
            self.answer(404, {"error": "no route " + self.path})
            return
        payload = json.loads(body or b"{}")
        task_id = self.headers["Dtq-Task-Id"]
        attempt = int(self.headers["Dtq-Attempt"])
        sidecar = Sidecar(self.headers.get("Dtq-Sidecar-Token", ""))

        if payload.get("reject"):
            self.answer(400, {"error": payload["reject"]})
            return
        if payload.get("fail_first_attempt") and attempt == 1:
            self.answer(500, {"error": "failing attempt 1 on purpose"})
            return
        if payload.get("sleep"):
            time.sleep(float(payload["sleep"]))
        if payload.get("sleep_first_attempt") and attempt == 1:
            time.sleep(float(payload["sleep_first_attempt"]))

        result = {"task": task_id, "attempt": attempt,
                  "idempotency_key": self.headers.get("Idempotency-Key", ""),
                  "flow_key": self.headers.get("Dtq-Flow-Key", "")}
        task_type = self.headers.get("Dtq-Task-Type", "")
        if task_type == "greet":
            sidecar.progress(task_id, {"step": "greeting"})
            result["greeting"] = "hello, %s" % payload.get("name", "world")
        elif task_type == "receipt":
            order = str(payload.get("order", ""))

            def send_receipt():
                # The side effect, unguarded: one line per receipt sent.
                if RECEIPT_LOG:
                    append_line(RECEIPT_LOG, {"order": order, "task": task_id, "attempt": attempt})
                return {"sent": order}

            try:
                sent, receipt = sidecar.idempotent_operation("receipt:" + order, send_receipt,
                                                             task_deadline(self.headers["Dtq-Deadline"]))
            except TimeoutError as e:
                self.answer(500, {"error": str(e)})  # retried with the queue's backoff
                return
            if payload.get("die_after_effect") and attempt == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            result["receipt"] = receipt
            result["sent_now"] = sent
        if payload.get("key") and EXEC_LOG:
            append_line(EXEC_LOG, {"key": payload["key"], "task": task_id, "attempt": attempt,
                                   "worker": "python-%d" % os.getpid(),
                                   "at": datetime.now(timezone.utc).isoformat()})
        self.answer(200, result)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    server.daemon_threads = False  # server_close waits for open requests

    def stop(signum, frame):
        # Finish the open requests, take no new ones: the listening socket
        # is closed at once, so the sidecar's next connection is refused
        # (it holds the task and hands it back uncounted) rather than queued
        # unanswered and reset when the process exits (costing an attempt).
        stopping.set()
        server.socket.close()
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    print("python handler listening on 127.0.0.1:%d" % PORT, file=sys.stderr, flush=True)
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
