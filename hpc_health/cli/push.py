"""``hpc-health push URL``: every stored run the dashboard has not
acknowledged, as JSON records of its judged figures.

ReFrame's own ``httpjson`` handler drops itself when its server does not
answer at start-up, so a dashboard that was down misses those nights.
Here a run stays queued until the server answers 2xx for it: a push after
an outage sends the nights it missed, and only those.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from hpc_health.cli.common import Ticker, site_option
from hpc_health.errors import ConfigError

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


def _send(url: str, body: bytes, token: str | None, timeout: float) -> str:
    """'' when the server took it (2xx), else why not."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return "" if 200 <= resp.status < 300 else f"answered {resp.status}"
    except urllib.error.HTTPError as err:
        return f"answered {err.code} {err.reason}"
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        return f"did not answer ({reason})"


@click.command()
@site_option
@click.argument("url")
@click.option("--retries", type=click.IntRange(0, 20), default=2, show_default=True,
              help="Tries after the first for each run before giving up until the next push.")
@click.option("--timeout", type=click.FloatRange(0.1, 600), default=10.0, show_default=True,
              help="Seconds to wait for the server, per request.")
@click.option("--token-file", type=click.Path(dir_okay=False),
              help=f"A bearer token for the server (else ${TOKEN_ENV}); never stored or printed.")
def push(site, url, retries, timeout, token_file):
    """Send the judged figures of every stored run the server at URL has not
    acknowledged: one POST per run, a JSON list of records (figure, value,
    unit, reference, bounds, MDC, verdict, reason, run id, tags, stack
    hash).  A run the server does not take stays queued: exit 1 and one
    line saying how many wait."""
    from hpc_health.judge import results
    from hpc_health.run import preflight, session
    from hpc_health.store import acks, index
    if not url.startswith(("http://", "https://")):
        raise click.UsageError(f"{url!r} is not an http:// or https:// URL")
    token = _token(token_file)
    s, refs = preflight.validate(site)
    with index.open_index() as idx:
        runs = idx.listing(s.name).runs
    done = acks.acknowledged(url)
    queue = [r for r in runs if f"{r.site}/{r.run_id}" not in done]
    sent = 0
    tick = Ticker("push: runs sent", len(queue))
    for i, r in enumerate(queue):
        vs = session.judge_report(results.load_report(r.dir / "report.json"), refs,
                                  r.meta.get("hardware"), run=r, settings=s.settings)
        body = json.dumps(records(r, vs)).encode()
        for attempt in range(retries + 1):
            why = _send(url, body, token, timeout)
            if not why:
                break
            time.sleep(min(2.0 ** attempt, 5.0) if attempt < retries else 0)
        if why:
            click.echo(f"push: the server {why}; {len(queue) - i} run(s) of {s.name} wait for "
                       f"{_safe(url)} and are sent by the next push ({sent} sent now)", err=True)
            raise SystemExit(1)
        done.add(f"{r.site}/{r.run_id}")
        acks.record(url, done)
        sent += 1
        tick()
    click.echo(f"push: {sent} run(s) of {s.name} sent to {_safe(url)}; "
               f"{len(runs) - len(queue)} already there")


def _safe(url: str) -> str:
    """The URL without a user name or password."""
    from urllib.parse import urlsplit, urlunsplit
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
