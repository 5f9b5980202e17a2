"""`hpc-health push` against real servers on 127.0.0.1 that answer badly:
a redirect, something that is not HTTP, a trickle, silence, and two
pushes at once.  Each ends in one line, the right exit code, and no run
recorded as delivered that the dashboard did not take."""

import json
import os
import socketserver
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sandbox import environ, hpc_health, make_root, store
from store_fixtures import case, write_run

RUNS = ("20261120T020000Z", "20261121T020000Z")


def _root(tmp_path):
    root = make_root(tmp_path, references=False)
    for rid in RUNS:
        write_run(store(root), "local", rid, [case("StreamTriadScaling", "triad", 35000, "MB/s")],
                  started=rid)
    return root


@contextmanager
def _http(routes, delay=0.0):
    """An HTTP server; *routes* maps (method, path) to (status, headers);
    what it was sent is yielded as [(method, path, body, headers)]."""
    got = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            got.append((self.command, self.path, body, dict(self.headers)))
            time.sleep(delay)
            status, headers = routes.get((self.command, self.path), (404, {}))
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def _raw(answer):
    """A TCP server on 127.0.0.1 whose connections are handled by
    *answer(socket)* (it reads the request itself, or not)."""
    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            try:
                answer(self.request)
            except OSError:
                pass        # the client hung up: what a timeout does

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hpc-health"
    finally:
        server.shutdown()
        server.server_close()


def _acknowledged(root):
    return [json.loads(p.read_text())["acknowledged"]
            for p in (store(root) / "push").glob("*.json")]


def _one_line_no_traceback(res):
    assert "Traceback" not in res.stderr, res.stderr
    said = [x for x in res.stderr.splitlines() if not x.startswith("hpc-health: index:")]
    assert len(said) == 1 and said[0].startswith("push: the server "), res.stderr


def test_a_redirect_that_turns_the_post_into_a_get_delivers_nothing(tmp_path):
    root = _root(tmp_path)
    routes = {("POST", "/hpc-health"): (302, {"Location": "/moved"}),
              ("GET", "/moved"): (200, {})}
    with _http(routes) as (base, got):
        res = hpc_health(root, "push", "--site", "local", f"{base}/hpc-health", timeout=60)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "answered 302 Found to the POST (a redirect to /moved" in res.stderr
    assert "2 run(s) of local wait for" in res.stderr
    _one_line_no_traceback(res)
    # Tried once (another try changes nothing), never followed as a GET.
    assert [(m, p) for m, p, _, _ in got] == [("POST", "/hpc-health")]
    assert _acknowledged(root) == []


def test_a_redirect_that_keeps_the_method_is_followed_with_the_body(tmp_path):
    root = _root(tmp_path)
    routes = {("POST", "/old"): (308, {"Location": "/new"}), ("POST", "/new"): (201, {})}
    with _http(routes) as (base, got):
        env = {**os.environ, "HPC_HEALTH_PUSH_TOKEN": "s3cret"}
        res = hpc_health(root, "push", "--site", "local", f"{base}/old", env=env, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    delivered = [json.loads(body)[0]["run"] for m, p, body, _ in got if p == "/new"]
    assert delivered == list(RUNS)
    keys = [h["Idempotency-Key"] for m, p, _, h in got if p == "/new"]
    assert keys == [f"hpc-health:local:{rid}" for rid in RUNS]
    assert all(h["Authorization"] == "Bearer s3cret" for _, _, _, h in got)
    assert _acknowledged(root) == [[f"local/{rid}" for rid in RUNS]]


def test_an_answer_that_is_not_http_is_one_line(tmp_path):
    root = _root(tmp_path)

    def ssh(sock):
        sock.recv(65536)
        sock.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\x1b]0;owned\x07\r\n")

    with _raw(ssh) as url:
        res = hpc_health(root, "push", "--site", "local", url, "--retries", "0", timeout=60)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "did not answer in HTTP (BadStatusLine" in res.stderr
    assert "\x1b" not in res.stderr
    _one_line_no_traceback(res)
    assert _acknowledged(root) == []


def test_a_server_that_trickles_or_stays_silent_is_timed_out_whole(tmp_path):
    root = _root(tmp_path)
    done = threading.Event()

    def trickle(sock):
        sock.recv(65536)
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
            sock.sendall(bytes([byte]))         # each byte well inside a socket timeout
            if done.wait(5):
                return

    def silent(sock):
        sock.recv(65536)
        done.wait(60)

    for answer in (trickle, silent):
        with _raw(answer) as url:
            began = time.monotonic()
            res = hpc_health(root, "push", "--site", "local", url, "--timeout", "3",
                             "--retries", "0", timeout=60)
            took = time.monotonic() - began
            done.set()
        done.clear()
        assert res.returncode == 1, res.stdout + res.stderr
        assert "did not answer within 3 s (the whole request" in res.stderr
        _one_line_no_traceback(res)
        assert took < 15, took      # 3 s, and Python's start
        assert _acknowledged(root) == []


def test_two_pushes_at_once_send_each_run_once(tmp_path):
    root = _root(tmp_path)
    routes = {("POST", "/hpc-health"): (200, {})}
    with _http(routes, delay=1.0) as (base, got):
        cmd = [sys.executable, "-m", "hpc_health", "push", "--site", "local", f"{base}/hpc-health"]
        both = [subprocess.Popen(cmd, env=environ(root), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=60) for p in both]
    assert [p.returncode for p in both] == [0, 0], outs
    sent = sorted(json.loads(body)[0]["run"] for _, _, body, _ in got)
    assert sent == list(RUNS), sent
    said = "".join(out + err for out, err in outs)
    assert "2 run(s) of local sent" in said and "0 run(s) of local sent" in said
