"""``harnessmem inspect``: a local web page that shows what an agent remembers.

:func:`create_app` builds a Starlette application over an open ``MemoryHarness``:
server-rendered pages (Jinja2 templates shipped in the package, htmx for live search, no
build step, nothing fetched from elsewhere) for ``MEMORY.md`` with its previous versions and a
diff between any two, the daily logs by date, search with the query's words marked, the
session logs with their compaction timeline and evicted tool results, and model usage by
job; and the one kind of change it makes, forgetting or editing a fact: a preview (a dry
run) first, then a POST that carries a token of this app instance. :func:`serve` runs it
with uvicorn.

Safety: memory is untrusted text (whatever a conversation put there), so every value is
escaped by the templates, Markdown is rendered with raw HTML off and unsafe links dropped,
and responses carry a content security policy that allows only this page's own script and
style. Files are read only through the harness (the confinement of ``memory_get``) or by
names the page itself listed. On a loopback address only the names it was bound with are
answered, and a request from a page of another site (its ``Origin``) is refused (no DNS
rebinding); on any other address a token is required (``?token=`` once, then a cookie, or
``Authorization: Bearer``), and a wrong or missing one gets 401. With ``mcp.auth = "jwt"``
that token may be a JWT access token the MCP server would take (:mod:`harnessmem.access`):
the reading scope for the pages, the forgetting scope for forget and edit (403 without it).
Odd input (a token beyond
ASCII, an encoded ``..``, a symlink that leads out of the workspace) gets a 4xx with one
line, never a 500.

Needs the ``inspect`` extra: ``pip install 'harnessmem[inspect]'``.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessmem import layout
from harnessmem.audit import acting_as
from harnessmem.errors import ConfigError, PathNotAllowed
from harnessmem.inspector.charts import compaction_chart, upkeep_chart
from harnessmem.inspector.guard import Guard
from harnessmem.inspector.text import diff_rows, marked, message_text, render_markdown
from harnessmem.layout import HISTORY_DIR, MEMORY_DIR, MEMORY_FILE, SESSIONS_DIR
from harnessmem.memory import files as mf
from harnessmem.settings import exposure
from harnessmem.settings.exposure import is_loopback, loopback_names, same_secret

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from harnessmem.access import JwtVerifier
    from harnessmem.harness import MemoryHarness

HERE = Path(__file__).resolve().parent
_STAMP = re.compile(r"MEMORY-(\d{8}T\d{6}Z)")
#: The longest text of one message the session page shows (the rest: "get" it).
MESSAGE_CHARS = 2_000
#: The latest audit records the audit page shows.
AUDIT_ROWS = 200


def _missing_extra(exc: ImportError) -> ConfigError:
    return ConfigError(
        f"harnessmem inspect needs the 'inspect' extra ({exc.name} is not installed)",
        hint="pip install 'harnessmem[inspect]'",
    )


def check_exposure(host: str, token: str | None) -> None:
    """ConfigError when ``host`` is reachable from other machines and there is no token."""
    exposure.check_exposure(
        host,
        token,
        refusal=f"harnessmem inspect on {host} would show memory to the network without a token",
        hint="pass --token (or set HARNESSMEM_INSPECT_TOKEN), or bind to 127.0.0.1",
    )


# ------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Version:
    """One version of MEMORY.md: the current file or one kept in ``memory/.history/``."""

    key: str
    path: str
    label: str


def _versions(harness: MemoryHarness) -> list[Version]:
    """MEMORY.md's versions, newest first: the current one, then the kept ones."""
    kept = []
    for rel in harness.workspace.list(HISTORY_DIR):
        match = _STAMP.search(rel)
        if layout.is_history_path(rel) and match:
            moment = datetime.strptime(match[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            label = "replaced " + moment.strftime("%Y-%m-%d %H:%M:%S UTC")
            kept.append(Version(rel.rsplit("/", 1)[1].removesuffix(".md"), rel, label))
    kept.sort(key=lambda v: v.path, reverse=True)
    # Two versions replaced within one second: told apart by their order.
    seen: dict[str, int] = {}
    for index, version in enumerate(kept):
        count = seen[version.label] = seen.get(version.label, 0) + 1
        if count > 1:
            kept[index] = Version(version.key, version.path, f"{version.label} ({count})")
    return [Version("current", MEMORY_FILE, "current"), *kept]


def _when(stamp: Any) -> str:
    """An ISO instant as people read it: ``2026-12-03 09:13:35 UTC`` (no fraction)."""
    moment = mf.parse_instant(stamp)
    if moment is None:
        return stamp if isinstance(stamp, str) else ""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _read(harness: MemoryHarness, path: str) -> str:
    try:
        return harness.workspace.read_text(path)
    except FileNotFoundError:
        return ""


def _daily_logs(harness: MemoryHarness) -> list[tuple[str, str]]:
    """(date, path) of every daily log, archived ones included, newest first."""
    found = []
    for rel in harness.workspace.list(MEMORY_DIR):
        day = layout.daily_log_date(rel, archived=None)
        if day:
            found.append((day, rel))
    return sorted(found, reverse=True)


def _sessions(harness: MemoryHarness) -> list[tuple[str, str, int]]:
    """(session id, log path, size) of every session log, largest file last changed first."""
    found = []
    for info in harness.workspace.scan(SESSIONS_DIR, recursive=False):
        if info.path.endswith(layout.SESSION_LOG_SUFFIX):
            sid = layout.session_stem(info.path)
            if sid:
                found.append((sid, info.path, info.size, info.modified or 0.0))
    found.sort(key=lambda item: item[3], reverse=True)
    return [(sid, path, size) for sid, path, size, _ in found]


def _timeline(records: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per offload (a compaction): when, how many messages, their tokens."""
    from harnessmem.tokens import TokenCounter

    counter = TokenCounter()
    rows: list[dict[str, Any]] = []
    for record in records:
        if not rows or rows[-1]["ts"] != record.ts:
            rows.append(
                {"ts": record.ts, "when": _when(record.ts), "messages": 0, "tokens": 0}
                | {"first": record.seq}
            )
        rows[-1]["messages"] += 1
        rows[-1]["tokens"] += counter.count_messages([record.message])
        rows[-1]["last"] = record.seq
    return rows


def _recent_changes(harness: MemoryHarness, limit: int = 10) -> list[dict[str, str]]:
    """What changed memory lately, newest first: flushes into the daily logs (the last
    three logs), saves into MEMORY.md, and consolidations (the versions kept)."""
    changes: list[dict[str, str]] = []

    def entries(path: str, text: str) -> None:
        heading: dict[str, str] | None = None
        for number, line in enumerate(text.splitlines(), 1):
            found = mf.ENTRY_HEADING.match(line)
            if found:
                kind = "flush" if found["kind"] == "Memory Flush" else "save"
                when = found["when"]
                heading = {"when": _when(when), "stamp": when, "kind": kind, "facts": "0"}
                heading |= {"where": f"{path}:{number}", "session": found["session"] or ""}
                changes.append(heading)
            elif heading is not None and line.startswith(("- ", "* ")):
                heading["facts"] = str(int(heading["facts"]) + 1)

    for _, path in _daily_logs(harness)[:3]:
        entries(path, _read(harness, path))
    entries(MEMORY_FILE, _read(harness, MEMORY_FILE))
    for version in _versions(harness)[1:]:
        stamp = _STAMP.search(version.path)
        if stamp:
            moment = datetime.strptime(stamp[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            changes.append(
                {"when": _when(moment.isoformat()), "stamp": moment.isoformat(), "kind":
                 "consolidation", "facts": "", "where": version.key, "session": ""}
            )  # fmt: skip
    changes.sort(key=lambda change: _when(change["stamp"]), reverse=True)
    return changes[:limit]


# ------------------------------------------------------------------------------ the app


def create_app(
    harness: MemoryHarness,
    *,
    token: str | None = None,
    host: str = "127.0.0.1",
    verifier: JwtVerifier | None = None,
) -> Starlette:
    """The inspector's ASGI application over ``harness`` (which the caller closes).

    ``token``: required of every request when set. ``verifier``: the JWT access tokens it
    accepts are taken too (then a request needs one or the other). ``host``: the address
    the server listens on; on a loopback one only the names it is reached by are answered
    (:func:`~harnessmem.settings.exposure.loopback_names`: ``127.0.0.2`` answers
    ``127.0.0.2`` only), and a request whose ``Origin`` is another site gets 403."""
    try:
        from jinja2 import Environment, FileSystemLoader, select_autoescape
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.middleware.trustedhost import TrustedHostMiddleware
        from starlette.responses import HTMLResponse, PlainTextResponse
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles
    except ImportError as exc:
        raise _missing_extra(exc) from None

    templates = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )

    def page(name: str, request: Request, status: int = 200, **values: Any) -> Response:
        html = templates.get_template(name).render(
            request=request, workspace=harness.workspace.url, **values
        )
        return HTMLResponse(html, status_code=status)

    async def overview(request: Request) -> Response:
        stats = harness.kernel.index.stats()
        usage = harness.usage()
        memory = _read(harness, MEMORY_FILE)
        from harnessmem.tokens import memory_tokens

        recent = harness.usage(days=14)
        return page(
            "overview.html",
            request,
            memory_tokens=memory_tokens(memory),
            budget=harness.settings.consolidation.max_memory_tokens,
            daily=_daily_logs(harness),
            sessions=_sessions(harness),
            stats=stats,
            total=usage.total,
            html=render_markdown(memory),
            changes=_recent_changes(harness),
            upkeep=upkeep_chart(recent.per_day),
        )

    async def memory(request: Request) -> Response:
        versions = _versions(harness)
        return page(
            "memory.html",
            request,
            html=render_markdown(_read(harness, MEMORY_FILE)),
            versions=versions,
        )

    async def diff(request: Request) -> Response:
        versions = {v.key: v for v in _versions(harness)}
        keys = list(versions)
        new_key = request.query_params.get("to", "current")
        old_key = request.query_params.get("from") or (keys[1] if len(keys) > 1 else "current")
        if new_key not in versions or old_key not in versions:
            return PlainTextResponse("no such version of MEMORY.md", status_code=404)
        old, new = versions[old_key], versions[new_key]
        rows = diff_rows(_read(harness, old.path), _read(harness, new.path))
        return page(
            "diff.html", request, rows=rows, old=old, new=new, versions=list(versions.values())
        )

    async def daily_index(request: Request) -> Response:
        return page("daily_index.html", request, daily=_daily_logs(harness))

    async def daily(request: Request) -> Response:
        day = request.path_params["day"]
        found = dict(_daily_logs(harness))
        if day not in found:
            return PlainTextResponse(f"no daily log for {day}", status_code=404)
        return page(
            "daily.html",
            request,
            day=day,
            path=found[day],
            html=render_markdown(_read(harness, found[day])),
            daily=sorted(found),
        )

    def hits_of(request: Request) -> tuple[str, str, list[Any]]:
        query = request.query_params.get("q", "")[:500]
        source = "sessions" if request.query_params.get("source") == "sessions" else "memory"
        hits = harness.search(query, limit=20, source=source) if query.strip() else []
        return query, source, [(hit, marked(hit.content, query)) for hit in hits]

    async def search(request: Request) -> Response:
        query, source, hits = hits_of(request)
        return page("search.html", request, query=query, source=source, hits=hits)

    async def search_results(request: Request) -> Response:
        query, source, hits = hits_of(request)
        return page("_hits.html", request, query=query, source=source, hits=hits)

    async def why(request: Request) -> Response:
        from harnessmem.memory.provenance import TraceError

        query = request.query_params.get("q", "")[:500]
        traces: list[Any] = []
        error = ""
        if query.strip():
            try:
                traces = harness.trace(query)
            except TraceError as exc:
                error = str(exc)
        return page("why.html", request, query=query, traces=traces, error=error)

    # Forget and edit change the workspace: a POST with this app's token (a page from
    # elsewhere cannot read it, so cannot forge the form), after a preview (a dry run).
    csrf = secrets.token_urlsafe(32)

    def correction(request: Request, fields: Mapping[str, str], *, run: bool) -> Response:
        from harnessmem.errors import ForgetError

        query = fields.get("q", "")[:500]
        new = fields.get("new", "")[:2_000]
        sessions = fields.get("sessions") == "on"
        editing = "new" in fields
        if not run and not (query.strip() and (new.strip() or not editing)):
            # Nothing to preview yet: the empty form.
            return page(
                "forget.html", request, query=query, new=new, editing=editing,
                sessions=sessions, csrf=csrf,
            )  # fmt: skip
        try:
            with acting_as("inspector"):
                if editing:
                    result = harness.forget(query, replace_with=new, dry_run=not run)
                else:
                    result = harness.forget(query, dry_run=not run, sessions=sessions)
        except ForgetError as exc:
            return page(
                "forget.html", request, query=query, new=new, editing=editing,
                sessions=sessions, error=exc.message, hint=exc.hint, csrf=csrf, status=400,
            )  # fmt: skip
        return page(
            "forget.html", request, query=query, new=new, editing=editing,
            sessions=sessions, result=result, csrf=csrf,
        )  # fmt: skip

    async def forget_preview(request: Request) -> Response:
        return correction(request, request.query_params, run=False)

    async def forget_run(request: Request) -> Response:
        from urllib.parse import parse_qsl

        # A page elsewhere may post here: the type and size are checked before anything is
        # read, and at most FORM_LIMIT bytes are ever held.
        kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            return PlainTextResponse("415: a forget is posted as a form", status_code=415)
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > FORM_LIMIT):
            return PlainTextResponse(_TOO_LARGE, status_code=413)
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > FORM_LIMIT:
                return PlainTextResponse(_TOO_LARGE, status_code=413)
        fields = dict(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
        if not same_secret(fields.pop("csrf", ""), csrf):
            return PlainTextResponse(
                "403: the form's token is missing or stale; open the preview again",
                status_code=403,
            )
        return correction(request, fields, run=True)

    async def sessions(request: Request) -> Response:
        return page("sessions.html", request, sessions=_sessions(harness))

    async def session(request: Request) -> Response:
        from harnessmem.memory.transcripts import SessionTranscript

        sid = request.path_params["sid"]
        # A session log is a file right in sessions/: an id with a "/" (an encoded "../"
        # too) or a dot name names none, and is answered before anything is listed.
        known = {} if "/" in sid or sid in (".", "..") else _sessions_by_id(harness)
        if sid not in known:
            return PlainTextResponse(f"no session log for {sid}", status_code=404)
        records = SessionTranscript(harness.workspace, sid).records()
        rows = _timeline(records)
        evicted_dir = f"{harness.settings.eviction.path.strip('/')}/{sid}"
        evicted = [(i.path, i.size) for i in harness.workspace.scan(evicted_dir)]
        messages = [
            {
                "seq": r.seq,
                "role": r.message.get("role", "?"),
                "name": r.message.get("name"),
                "said": _when(r.said or r.message.get("timestamp") or r.ts),
                "text": message_text(r.message)[:MESSAGE_CHARS],
            }
            for r in records
        ]
        return page(
            "session.html",
            request,
            sid=sid,
            path=known[sid],
            timeline=rows,
            chart=compaction_chart(rows),
            messages=messages,
            evicted=evicted,
        )

    async def usage(request: Request) -> Response:
        report = harness.usage()
        return page("usage.html", request, report=report)

    async def audit(request: Request) -> Response:
        from harnessmem.audit import OPERATIONS, read_audit

        op = request.query_params.get("op", "")
        actor = request.query_params.get("actor", "")[:200]
        records = read_audit(
            harness.workspace,
            ops=[op] if op in OPERATIONS else None,
            actor=actor.strip() or None,
            limit=AUDIT_ROWS,
            timezone=harness.settings.workspace.timezone,
        )
        return page(
            "audit.html",
            request,
            records=[_audit_row(r) for r in reversed(records)],
            ops=OPERATIONS,
            op=op,
            actor=actor,
            limit=AUDIT_ROWS,
        )

    async def get_file(request: Request) -> Response:
        path = request.query_params.get("path", "")
        start = request.query_params.get("start", "1")
        try:
            text = harness.get(path, start_line=int(start) if start.isdigit() else 1, lines=300)
        except FileNotFoundError:
            return PlainTextResponse(f"{path} does not exist", status_code=404)
        except Exception as exc:  # PathNotAllowed and kin: the message says why
            return PlainTextResponse(str(exc).splitlines()[0], status_code=403)
        return page("file.html", request, path=path, text=text)

    routes = [
        Route("/", overview),
        Route("/memory", memory),
        Route("/memory/diff", diff),
        Route("/daily", daily_index),
        Route("/daily/{day}", daily),
        Route("/search", search),
        Route("/search/results", search_results),
        Route("/why", why),
        Route("/forget", forget_preview, methods=["GET"]),
        Route("/forget", forget_run, methods=["POST"]),
        Route("/sessions", sessions),
        Route("/sessions/{sid:path}", session),
        Route("/usage", usage),
        Route("/audit", audit),
        Route("/file", get_file),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    names = loopback_names(host)
    middleware = [Middleware(Guard, token=token, names=names, verifier=verifier)]
    if names:
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=list(names)))
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={PathNotAllowed: _not_allowed},
    )


def _audit_row(record: Any) -> dict[str, Any]:
    """One row of the audit page: when, what, who, the files with short hashes."""

    def short(digest: str | None) -> str:
        return digest[:10] if digest else "none"

    return {
        "id": record.id,
        "when": _when(record.at),
        "op": record.op,
        "actor": record.actor,
        "tenant": record.tenant,
        "counts": ", ".join(f"{k} {v}" for k, v in record.counts.items()),
        "files": [(c.path, short(c.before), short(c.after)) for c in record.files],
        "error": record.error,
        "trace": record.trace_id,
    }


async def _not_allowed(request: Request, exc: Exception) -> Response:
    """403 with the first line of a refused path (a symlink out of the workspace where
    ``sessions/`` should be): the page cannot be shown, and nothing is wrong with the app."""
    from starlette.responses import PlainTextResponse

    return PlainTextResponse(f"403: {str(exc).splitlines()[0]}", status_code=403)


def _sessions_by_id(harness: MemoryHarness) -> dict[str, str]:
    return {sid: path for sid, path, _ in _sessions(harness)}


#: The largest form the inspector reads (a forget form is a few hundred bytes).
FORM_LIMIT = 64 * 1024
_TOO_LARGE = f"413: a form of at most {FORM_LIMIT // 1024} kB is read"


def serve(
    harness: MemoryHarness,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    verifier: JwtVerifier | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the inspector until interrupted (SIGINT, SIGTERM); a non-loopback ``host``
    needs a ``token``, or ``mcp.auth = "jwt"`` in the harness's settings: then the JWT
    access tokens of ``mcp.jwt`` are taken (``verifier``, else one made from them).
    ``ready(url)`` is called once the socket listens."""
    loopback = is_loopback(host)
    if verifier is None and not loopback and harness.settings.mcp.auth == "jwt":
        from harnessmem.access import JwtVerifier

        verifier = JwtVerifier(harness.settings.mcp.jwt)
    if verifier is None:
        check_exposure(host, token)
    try:
        import uvicorn
    except ImportError as exc:
        raise _missing_extra(exc) from None
    app = create_app(harness, token=token, host=host, verifier=verifier)
    # Bound before serving: ``ready`` gets the real port (port 0 picks one).
    sock, bound = exposure.listen(host, port)
    try:
        if ready is not None:
            ready(f"http://{exposure.url_host(host)}:{bound}/")
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
