"""``hpc-health push URL``: every stored run the dashboard has not
acknowledged, as JSON records of its judged figures.

ReFrame's own ``httpjson`` handler drops itself when its server does not
answer at start-up, so a dashboard that was down misses those nights.
Here a run stays queued until the server answers 2xx for it: a push after
an outage sends the nights it missed, and only those.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from hpc_health.cli.common import Ticker, site_option
from hpc_health.errors import ConfigError
from hpc_health.render import escape

if TYPE_CHECKING:    # the command starts without numpy: judged runs import it
    from hpc_health.judge import verdicts as V

#: Where a token comes from when --token-file is not given.
TOKEN_ENV = "HPC_HEALTH_PUSH_TOKEN"


def records(run: Any, vs: Sequence[V.Verdict]) -> list[dict[str, Any]]:
    """One flat record per judged figure: what a dashboard indexes."""
    meta = run.meta
    base = {"site": run.site, "run": run.run_id, "started": meta.get("started"),
            "tags": list(meta.get("tags") or []), "stack_hash": meta.get("stack_hash"),
            "host": meta.get("hostname"), "run_exit_code": meta.get("exit_code")}
    out = []
    for v in vs:
        m = v.measurement
        out.append({**base, "partition": m.partition_fullname, "environ": m.environ,
                    "check": m.check, "figure": m.variable, "value": m.value, "unit": m.unit,
                    "reference": m.ref, "lower": m.lower, "upper": m.upper, "mdc": v.mdc,
                    "verdict": v.verdict, "reason": v.reason})
    return out


def _token(token_file: str | None) -> str | None:
    if token_file:
        try:
            with open(token_file) as fp:
                return fp.read().strip() or None
        except OSError as err:
            raise ConfigError(token_file, f"cannot read the push token: {err.strerror}") from None
    return os.environ.get(TOKEN_ENV) or None


#: 307 and 308 keep the method and the body: the one redirect a POST follows.
KEEPS_THE_METHOD = (307, 308)
#: Redirects followed at most for one run.
MAX_REDIRECTS = 3


def _send(url: str, body: bytes, token: str | None, timeout: float, key: str) -> str:
    """'' when the server took it, else why not.  Only a 2xx answer to the
    POST itself acknowledges: urllib would repeat a POST answered 301, 302
    or 303 as a GET, and a page saying 200 to that GET is not the
    dashboard taking the run.  *timeout* bounds the whole request,
    redirects included; *key* is the run's idempotency key."""
    from urllib.parse import urljoin, urlsplit
    deadline = time.monotonic() + timeout
    origin = urlsplit(url)[:2]
    for _ in range(MAX_REDIRECTS + 1):
        headers = {"Content-Type": "application/json", "Idempotency-Key": key}
        if token and urlsplit(url)[:2] == origin:    # never to another host
            headers["Authorization"] = f"Bearer {token}"
        try:
            status, reason, location = _post(url, body, headers, deadline)
        except _TimedOut:
            return (f"did not answer within {timeout:g} s (the whole request: connecting, "
                    "sending, its answer)")
        except http.client.HTTPException as err:
            # BadStatusLine and friends: something answered, not in HTTP.
            return f"did not answer in HTTP ({type(err).__name__}: {escape.one_line(err)[:120]})"
        except OSError as err:
            return f"did not answer ({escape.one_line(err.strerror or err)})"
        if 200 <= status < 300:
            return ""
        said = f"answered {status} {escape.one_line(reason)[:80]}".rstrip()
        if 300 <= status < 400:
            if status not in KEEPS_THE_METHOD or not location:
                return (f"{said} to the POST (a redirect to {escape.one_line(location)[:200]}: "
                        "a POST is repeated elsewhere only when the server keeps its method "
                        "with 307 or 308; give the dashboard's own URL)")
            url = urljoin(url, location)
            if not url.startswith(("http://", "https://")):
                return f"{said}, a redirect to {escape.one_line(url)[:200]}, not an http(s) URL"
            continue
        return said
    return f"redirected more than {MAX_REDIRECTS} times"


class _TimedOut(Exception):
    pass


def _post(url: str, body: bytes, headers: dict[str, str],
          deadline: float) -> tuple[int, str, str | None]:
    """(status, reason, Location) of one POST, before *deadline*.  A socket
    timeout bounds each wait, not the request: a server that trickles its
    answer a byte every few seconds never lets it expire.  So a timer shuts
    the socket at the deadline, whatever the request is doing."""
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    left = deadline - time.monotonic()
    if left <= 0:
        raise _TimedOut
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    proxy = _proxy(parts)
    if proxy is None:
        conn = kind(parts.hostname or "", parts.port, timeout=left)
    else:   # $https_proxy / $http_proxy, as urllib honours them
        conn = kind(proxy.hostname or "", proxy.port, timeout=left)
        if parts.scheme == "https":
            conn.set_tunnel(parts.hostname or "", parts.port)
        else:
            path = url
    fired = threading.Event()

    def shut() -> None:
        fired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(left, shut)
    timer.daemon = True
    timer.start()
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        if fired.is_set():
            raise _TimedOut
        return resp.status, resp.reason, resp.getheader("Location")
    except (OSError, http.client.HTTPException):
        if fired.is_set() or time.monotonic() >= deadline:
            raise _TimedOut from None
        raise
    finally:
        timer.cancel()
        conn.close()


def _proxy(parts: Any) -> Any:
    """The proxy the environment names for this URL, or None."""
    import urllib.request
    from urllib.parse import urlsplit
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxy = urllib.request.getproxies().get(parts.scheme)
    return urlsplit(proxy if "://" in proxy else f"http://{proxy}") if proxy else None


def idempotency_key(run: Any) -> str:
    """The run's key, the same at every try and every push: a server that
    keeps the keys it took can drop a run sent again (a push whose answer
    was lost on the way back sends it again next time)."""
    return f"hpc-health:{run.site}:{run.run_id}"


@click.command()
@site_option
@click.argument("url")
@click.option("--retries", type=click.IntRange(0, 20), default=2, show_default=True,
              help="Tries after the first for each run before giving up until the next push.")
@click.option("--timeout", type=click.FloatRange(0.1, 600), default=10.0, show_default=True,
              help="Seconds one request may take in all: connecting, sending, the answer.")
@click.option("--wait", type=click.FloatRange(0, 86400), default=300, show_default=True,
              metavar="SECONDS", help="How long to wait for another push to the same URL.")
@click.option("--token-file", type=click.Path(dir_okay=False),
              help=f"A bearer token for the server (else ${TOKEN_ENV}); never stored or printed.")
def push(site, url, retries, timeout, wait, token_file):
    """Send the judged figures of every stored run the server at URL has not
    acknowledged: one POST per run, a JSON list of records (figure, value,
    unit, reference, bounds, MDC, verdict, reason, run id, tags, stack
    hash).  A run the server does not take stays queued: exit 1 and one
    line saying how many wait.  Each POST carries the header
    `Idempotency-Key: hpc-health:SITE:RUN_ID`; two pushes to one URL take
    turns, and the second sends only what the first did not."""
    from hpc_health.run import preflight
    from hpc_health.store import acks, index
    if not url.startswith(("http://", "https://")):
        raise click.UsageError(f"{url!r} is not an http:// or https:// URL")
    token = _token(token_file)
    s, refs = preflight.validate(site)
    with index.open_index() as idx:
        runs = idx.listing(s.name).runs
    with acks.pushing(url, wait, lambda line: click.echo(f"push: {line}", err=True)):
        # Read under the lock: what another push sent meanwhile is not sent again.
        _push(s, runs, refs, url, token, retries, timeout)


def _push(site, runs, refs, url, token, retries, timeout):
    from hpc_health.store import acks, judged
    done = acks.acknowledged(url)
    queue = [r for r in runs if f"{r.site}/{r.run_id}" not in done]
    sent = 0
    tick = Ticker("push: runs sent", len(queue))
    for i, r in enumerate(queue):
        vs = judged.verdicts_of(r, refs, site.settings)
        body = json.dumps(records(r, vs)).encode()
        for attempt in range(retries + 1):
            why = _send(url, body, token, timeout, idempotency_key(r))
            if not why or " to the POST (a redirect" in why:
                break       # taken, or sent elsewhere: another try changes nothing
            time.sleep(min(2.0 ** attempt, 5.0) if attempt < retries else 0)
        if why:
            click.echo(f"push: the server {why}; {len(queue) - i} run(s) of {site.name} wait for "
                       f"{_safe(url)} and are sent by the next push ({sent} sent now)", err=True)
            raise SystemExit(1)
        done.add(f"{r.site}/{r.run_id}")
        acks.record(url, done)
        sent += 1
        tick()
    click.echo(f"push: {sent} run(s) of {site.name} sent to {_safe(url)}; "
               f"{len(runs) - len(queue)} already there")


def _safe(url: str) -> str:
    """The URL without a user name or password."""
    from urllib.parse import urlsplit, urlunsplit
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
