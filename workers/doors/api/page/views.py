"""The page's HTML, rendered here only: the whole page, and the live parts (fragments) that
the server pushes over SSE and the script swaps in by element id."""

from __future__ import annotations

import base64
import hashlib
import time
from html import escape
from typing import Any

from workers.doors.api.page.board import Found

STATUSES = ("waiting", "running", "done", "degraded", "failed", "dead")
LABELS = {"dead": "dead-lettered"}

# The login page styles itself inline (its CSP allows exactly this text by hash), so that
# nothing but the login form is served without the cookie.
_LOGIN_STYLE = (
    "body{font:16px system-ui,sans-serif;display:grid;place-items:center;min-height:90vh;"
    "background:#f4f5f7;color:#1d2330}form{background:#fff;padding:2rem;border-radius:8px;"
    "box-shadow:0 1px 4px #0002;display:grid;gap:.8rem;min-width:22rem}"
    "input,button{font:inherit;padding:.5rem}.error{color:#a31515}"
)
LOGIN_STYLE_HASH = (
    "sha256-" + base64.b64encode(hashlib.sha256(_LOGIN_STYLE.encode()).digest()).decode()
)


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _hidden(csrf: str, **fields: str) -> str:
    extra = "".join(
        f'<input type="hidden" name="{_e(k)}" value="{_e(v)}">' for k, v in fields.items()
    )
    return f'<input type="hidden" name="csrf" value="{_e(csrf)}">{extra}'


def login_page(error: str | None = None) -> str:
    shown = f'<p class="error" role="alert">{_e(error)}</p>' if error else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>mcp-media: log in</title><style>{_LOGIN_STYLE}</style></head><body>"
        '<form method="post" action="/login"><h1>mcp-media jobs</h1>'
        "<label for=key>API key (MCP_MEDIA_API__KEY, or the file api-key in MCP_MEDIA_HOME)"
        "</label>"
        "<input id=key name=key type=password autocomplete=current-password required autofocus>"
        f'{shown}<button type="submit">Log in</button></form></body></html>'
    )


def counts_fragment(tile: dict[str, Any], csrf: str) -> str:
    cells = "".join(
        f'<div class="count {s}"><span class="n" data-status="{s}">{int(tile[s])}</span>'
        f"<span class=label>{LABELS.get(s, s)}</span></div>"
        for s in STATUSES
    )
    queue = tile["queue"]
    serving = len(tile["serving"])
    if tile["paused"]:
        state = f'<span class="badge paused">paused</span> {serving} worker(s) hold off'
        button = "Resume"
        action = "/page/resume"
    else:
        state = f'<span class="badge live">consuming</span> {serving} worker(s)'
        button = "Pause"
        action = "/page/pause"
    pause = (
        f'<form method=post action="{action}" data-action class=inline>'
        f"{_hidden(csrf, queue=queue)}"
        f'<button type=submit class="{button.lower()}" data-queue="{_e(queue)}">{button}</button>'
        "</form>"
    )
    batch = int(tile.get("batch") or 0)
    if batch:  # reprocess work, taken after live work (the waiting count holds it)
        state += f" <span class=lane>{batch} of the waiting in the batch lane</span>"
    return (
        f"<div class=counts>{cells}</div><div class=queue-state>{state} {pause}</div>{_run(tile)}"
    )


def _run(tile: dict[str, Any]) -> str:
    run = tile.get("run")
    if not run:
        return '<div class="run none">no reprocess run yet</div>'
    state = "running" if run["running"] and run["locked"] else "finished"
    if run["running"] and not run["locked"]:
        state = "stopped"
    percent = int(run["percent"])
    what = f"{run['mode']}{' + degraded' if run['include_degraded'] else ''}"
    detail = (
        f"{run['finished']}/{run['total']} finished (done {run['done']}, degraded "
        f"{run['degraded']}, failed {run['failed']}; {run['skipped']} up to date)"
        f"{_pace(run, state)}"
    )
    return (
        f'<div class="run {state}" data-state="{state}">'
        f"<label>reprocess {_e(what)}: {state}</label>"
        f'<progress max=100 value="{percent}" data-percent="{percent}"'
        f' aria-label="reprocess progress">{percent}%</progress>'
        f"<span class=percent>{percent}%</span> <span class=detail>{_e(detail)}</span></div>"
    )


def _pace(run: dict[str, Any], state: str) -> str:
    """Submitted so far, the rate of results and the time left, while the run goes."""
    resumed = f", resumed after {run['resumed']}" if run.get("resumed") else ""
    said = f"; enqueued {run.get('enqueued', 0)}/{run['total']}{resumed}"
    if state == "running" and run.get("rate"):
        eta = run.get("eta_seconds")
        said += f", {run['rate']:.1f}/s" + (f", about {eta:.0f} s left" if eta else "")
    return said


def _tile(tile: dict[str, Any], csrf: str) -> str:
    queue = tile["queue"]
    kind = tile["kind"]
    if kind is not None:
        steer = (
            f'<form method=post action="/page/reprocess" data-action class=reprocess>'
            f"{_hidden(csrf, kind=kind)}"
            "<button type=submit name=mode value=missing class=missing "
            f'title="reprocess the {kind} files without a done result">Missing</button>'
            "<button type=submit name=mode value=all class=all "
            f'title="reprocess every cached {kind} file again">All</button>'
            "<label><input type=checkbox name=include_degraded value=1> include degraded"
            "</label></form>"
        )
    else:
        steer = "<p class=note>speech requests are not cached media: nothing to reprocess</p>"
    return (
        f'<section class=tile id="tile-{_e(queue)}" data-capability="{_e(tile["capability"])}">'
        f"<h2>{_e(tile['capability'])} <small>queue {_e(queue)}</small></h2>"
        f'<div class=live id="counts-{_e(queue)}">{counts_fragment(tile, csrf)}</div>'
        f"{steer}</section>"
    )


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + " UTC"


def workers_fragment(workers: list[dict[str, Any]], csrf: str) -> str:
    if not workers:
        return "<p class=empty>no live worker (start one with: mcp-media worker --queues ...)</p>"
    rows = []
    for w in workers:
        name = w["name"]
        resize = "".join(
            f'<form method=post action="/page/concurrency" data-action class=inline>'
            f"{_hidden(csrf, worker=name, delta=delta)}"
            f'<button type=submit title="{title}">{sign}</button></form>'
            for delta, sign, title in (("-1", "−", "one less"), ("1", "+", "one more"))
        )
        paused = ", ".join(w.get("paused") or [])
        rss = "?" if w.get("rss_mib") is None else f"{w['rss_mib']:.0f} MiB"
        rows.append(
            f'<tr data-worker="{_e(name)}"><td>{_e(w["node"])}</td><td>{_e(name)}</td>'
            f"<td>{_e(','.join(w['queues']))}{f' (paused: {_e(paused)})' if paused else ''}</td>"
            f"<td>{_e(w.get('pool'))}</td>"
            f"<td class=procs>{_e(w.get('concurrency'))} x {_e(w.get('threads'))} {resize}</td>"
            f"<td>{_e(w.get('active'))}</td><td>{_e(rss)}</td>"
            f"<td>{_e(_ago(w.get('started_at')))}</td><td>{w['age_s']:.0f} s ago</td></tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "node",
            "worker",
            "queues",
            "pool",
            "processes x threads",
            "running",
            "memory",
            "up since",
            "last heartbeat",
        )
    )
    return (
        f"<div class=scroll><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def dead_fragment(dead: list[dict[str, Any]], csrf: str) -> str:
    if not dead:
        return "<p class=empty>no dead letters</p>"
    rows = []
    for entry in dead:
        job_id = str(entry.get("job_id", ""))
        key = str(entry.get("key", ""))
        capability = key.split(":", 1)[0]
        sha = key.rsplit(":", 1)[-1]
        at = entry.get("at")
        buttons = "".join(
            f'<form method=post action="{action}" data-action class=inline>'
            f"{_hidden(csrf, job_id=job_id)}<button type=submit class={cls}>{label}</button></form>"
            for action, cls, label in (
                ("/page/dead/retry", "retry", "retry"),
                ("/page/dead/clear", "clear", "clear"),
            )
        )
        rows.append(
            f'<tr data-job="{_e(job_id)}"><td>{_e(capability)}</td>'
            f"<td class=job><code>{_e(job_id)}</code></td><td><code>{_e(sha[:16])}…</code></td>"
            f"<td class=reason>{_e(entry.get('reason', ''))}</td>"
            f"<td>{_e(_ago(at if isinstance(at, int | float) else None))}</td>"
            f"<td>{buttons}</td></tr>"
        )
    clear_all = (
        '<form method=post action="/page/dead/clear" data-action class=inline>'
        f"{_hidden(csrf, all='1')}<button type=submit class=clear-all>clear all</button></form>"
    )
    return (
        "<div class=scroll><table><thead><tr><th>capability</th><th>job</th><th>sha256</th>"
        "<th>reason</th><th>at</th><th></th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>{clear_all}"
    )


def result_item(result: dict[str, Any]) -> str:
    capability = result["capability"]
    sha = result["sha256"]
    output = result.get("output") or {}
    meta = result.get("meta") or {}
    status = result["status"]
    media = ""
    text = ""
    if capability == "vision.summarize":
        media = f'<img src="/page/media/{_e(sha)}" alt="cached image {_e(sha[:12])}" loading=lazy>'
        text = output.get("summary") or ""
    elif capability == "audio.transcribe":
        media = f'<audio controls preload=metadata src="/page/media/{_e(sha)}"></audio>'
        text = output.get("text") or output.get("note") or ""
    elif capability == "audio.synthesize" and output.get("audio_sha256"):
        spoken = str(output["audio_sha256"])
        media = f'<audio controls preload=metadata src="/page/media/{_e(spoken)}"></audio>'
        text = f"spoken reply, {output.get('duration_s', '?')} s"
    reason = f"<p class=reason>{_e(meta.get('reason'))}</p>" if meta.get("reason") else ""
    return (
        f'<article class="result {_e(status)}" data-sha256="{_e(sha)}" '
        f'data-job="{_e(meta.get("job_id") or "")}">'
        f'<header><span class="badge {_e(status)}">{_e(status)}</span> {_e(capability)} '
        f"<code>{_e(sha[:12])}</code> job <code>{_e(meta.get('job_id') or '-')}</code></header>"
        f"{media}<p class=text>{_e(str(text)[:1500])}</p>{reason}</article>"
    )


def recent_fragment(recent: list[dict[str, Any]]) -> str:
    if not recent:
        return "<p class=empty>no results yet</p>"
    return "".join(result_item(r) for r in recent)


def fragments(snapshot: dict[str, Any], csrf: str) -> dict[str, str]:
    """Element id -> inner HTML of every live part of the page."""
    parts = {f"counts-{t['queue']}": counts_fragment(t, csrf) for t in snapshot["tiles"]}
    parts["workers"] = workers_fragment(snapshot["workers"], csrf)
    parts["dead"] = dead_fragment(snapshot["dead"], csrf)
    parts["recent"] = recent_fragment(snapshot["recent"])
    return parts


def search_section(found: Found | None, error: str | None) -> str:
    if error:
        return f"<section id=search-result class=error role=alert>{_e(error)}</section>"
    if found is None:
        return ""
    if found.key is None:
        body = f"nothing is known by {_e(found.query)}"
    elif found.envelope is None:
        body = f"job <code>{_e(found.job_id)}</code> for {_e(found.key)} is queued or running"
    else:
        body = result_item(dict(found.envelope.to_json()))
    return f"<section id=search-result><h2>search: {_e(found.query)}</h2>{body}</section>"


def page(
    snapshot: dict[str, Any],
    csrf: str,
    *,
    query: str = "",
    found: Found | None = None,
    error: str | None = None,
    message: str = "",
) -> str:
    tiles = "".join(_tile(t, csrf) for t in snapshot["tiles"])
    sections = "".join(
        f"<h2>{title}</h2><div class=live id={name}>{html}</div>"
        for title, name, html in (
            ("Workers", "workers", workers_fragment(snapshot["workers"], csrf)),
            ("Dead letters", "dead", dead_fragment(snapshot["dead"], csrf)),
            ("Recent results", "recent", recent_fragment(snapshot["recent"])),
        )
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<meta name="csrf" content="{_e(csrf)}">'
        '<title>mcp-media jobs</title><link rel=stylesheet href="/static/page.css">'
        '<script src="/static/page.js" defer></script></head><body>'
        "<header class=top><h1>mcp-media jobs</h1>"
        f'<form method=get action="/" class=search role=search><input name=q value="{_e(query)}" '
        'placeholder="sha256 or job id" aria-label="search by sha256 or job id" size=40>'
        "<button type=submit>Search</button></form>"
        "<span id=live class=off aria-live=polite>connecting…</span>"
        '<form method=post action="/logout" class=logout>'
        f"{_hidden(csrf)}<button type=submit>Log out</button></form></header>"
        f"<div id=message role=status aria-live=polite>{_e(message)}</div>"
        f"{search_section(found, error)}"
        f"<main><div class=tiles>{tiles}</div>{sections}</main></body></html>"
    )
