"""The console's web layer: a Starlette app of server-rendered pages over a ``ClusterView``.

Every page has its own address; the charts and the live tail poll two JSON endpoints. Every
change to the cluster is a POST form that first answers with a confirmation page stating what
will happen (for an offset reset: the dry run's table); only the form on that page, which
carries ``confirm=yes``, changes anything.

``ClusterView`` is blocking (confluent-kafka): every call runs in Starlette's thread pool. A
``ConsoleError`` becomes a page with its message and a fitting status (404 for ``NotFound``);
any other exception a generic error page and one log line with its traceback.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import re
import secrets
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from samsa.console.cluster_view import ClusterView
from samsa.console.display import (
    header_text,
    human_bytes,
    human_count,
    human_rate,
    parse_int,
    parse_lines,
    parse_timestamp,
    timestamp_text,
)
from samsa.console.formats import FORMATS, SchemaRegistry, matches, render
from samsa.console.history import History
from samsa.console.login import SESSION_COOKIE, LoginRequired, Sessions
from samsa.console.messages import STARTS
from samsa.console.model import BadRequest, ConsoleError, Message, NotFound, TopicDetail

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
T = TypeVar("T")

#: the most messages one page or one tail poll shows
MAX_LIMIT = 1000
#: how many messages a search (the filter of the messages page) reads at most
SEARCH_SCAN = 2000
#: the offset reset modes of ``samsa groups --reset-offsets``
RESET_MODES = ("to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime",
               "by-duration", "to-current")
#: the series the overview charts
OVERVIEW_SERIES = (("messages_in", "messages in / s"), ("bytes_in", "bytes in / s"),
                   ("bytes_out", "bytes out / s"))


# Kafka's error names in a ConsoleError's message that say "not now, the state conflicts" (409)
# or "the cluster cannot be reached" (503).
_CONFLICT = re.compile(r"ALREADY_EXISTS|NON_EMPTY_GROUP|GROUP_SUBSCRIBED_TO_TOPIC|"
                       r"has (active )?members|REBALANCE_IN_PROGRESS")
_UNAVAILABLE = re.compile(r"TRANSPORT|TIMED_OUT|ALL_BROKERS_DOWN|cannot connect|unreachable|"
                          r"not reachable|timed out", re.IGNORECASE)


def error_status(exc: ConsoleError, action: bool) -> int:
    """The HTTP status of a page that shows ``exc`` (``action``: a POST that was refused)."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, BadRequest):
        return 400
    if isinstance(exc, CrossSite):
        return 403
    message = str(exc)
    if _CONFLICT.search(message):
        return 409
    if _UNAVAILABLE.search(message):
        return 503
    # a refused change is the request's fault (INVALID_CONFIG, ...); a failed read the cluster's
    return 400 if action else 502


# ---------------------------------------------------------------------------------------------
# The app


class Notices:
    """One-shot messages shown on the page an action redirects to (``?notice=<id>``): kept
    here, so the address cannot be made to show arbitrary text."""

    def __init__(self, keep: int = 200) -> None:
        self._items: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()

    def add(self, text: str) -> str:
        key = secrets.token_urlsafe(8)
        with self._lock:
            self._items[key] = text
            while len(self._items) > self._keep:
                self._items.popitem(last=False)
        return key

    def get(self, key: str | None) -> str | None:
        with self._lock:
            return self._items.get(key or "")


class Console:
    """The pages: one method per route, sharing the view, the history and the templates."""

    def __init__(self, view: ClusterView, history: History | None,
                 registry: SchemaRegistry | None, sessions: Sessions | None,
                 cluster_name: str, secure_cookie: bool) -> None:
        self.view = view
        self.history = history
        self.registry = registry
        self.sessions = sessions
        self.cluster_name = cluster_name
        self.secure_cookie = secure_cookie
        self.notices = Notices()
        env = Environment(loader=FileSystemLoader(HERE / "templates"),
                          autoescape=select_autoescape(("html",)), trim_blocks=True,
                          lstrip_blocks=True)
        env.filters.update(bytes=human_bytes, rate=human_rate, num=human_count,
                           ts=timestamp_text, urlpart=lambda s: quote(str(s), safe=""))
        self.templates = Jinja2Templates(env=env)

    # -- plumbing ------------------------------------------------------------------------------

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await run_in_threadpool(fn, *args, **kwargs)

    def page(self, request: Request, template: str, code: int = 200,
             **context: Any) -> HTMLResponse:
        context.setdefault("notice", self.notices.get(request.query_params.get("notice")))
        context.update(cluster=self.cluster_name, login=self.sessions is not None,
                       user=request.scope.get("state", {}).get("user"))
        return self.templates.TemplateResponse(request, template, context, status_code=code)

    def error(self, request: Request, exc: ConsoleError, action: bool = False) -> HTMLResponse:
        status = error_status(exc, action)
        return self.page(request, "error.html", status, title="Error", message=str(exc),
                         status=status)

    def redirect(self, url: str, notice: str | None = None) -> RedirectResponse:
        if notice is not None:
            sep = "&" if "?" in url else "?"
            url = f"{url}{sep}notice={self.notices.add(notice)}"
        return RedirectResponse(url, status_code=303)

    def confirm(self, request: Request, form: FormData, *, title: str, summary: list[str],
                button: str, danger: bool = False, rows: list[list[str]] | None = None,
                columns: list[str] | None = None) -> HTMLResponse:
        """The confirmation step: what will happen, and the same form again with confirm=yes."""
        fields = [(k, str(v)) for k, v in form.multi_items() if k != "confirm"]
        return self.page(request, "confirm.html", title=title, summary=summary, button=button,
                         danger=danger, fields=fields, action=request.url.path, rows=rows,
                         columns=columns)

    # -- pages ---------------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        overview = await self.call(self.view.overview)
        return self.page(request, "overview.html", title="Overview", overview=overview,
                         series=OVERVIEW_SERIES, has_history=self.history is not None)

    async def topics(self, request: Request) -> Response:
        q = request.query_params.get("q", "").strip()
        internal = request.query_params.get("internal", "1") != "0"
        recent = self.history.recent_topics() if self.history is not None else None
        topics = recent if recent is not None else await self.call(self.view.topics)
        if not internal:
            topics = [t for t in topics if not t.internal]
        if q:
            needle = q.lower()
            topics = [t for t in topics if needle in t.name.lower()]
        rates = self.history.topic_rates() if self.history is not None else {}
        return self.page(request, "topics.html", title="Topics", topics=topics, q=q,
                         rates=rates, internal=internal)

    async def topic(self, request: Request) -> Response:
        name = request.path_params["name"]
        topic = await self.call(self.view.topic, name)
        return self.topic_page(request, topic)

    def topic_page(self, request: Request, topic: TopicDetail, code: int = 200,
                   **context: Any) -> HTMLResponse:
        return self.page(request, "topic.html", code, title=f"Topic {topic.name}", topic=topic,
                         has_history=self.history is not None, **context)

    async def messages(self, request: Request) -> Response:
        name = request.path_params["name"]
        params = request.query_params
        partition = parse_int(params.get("partition"), "partition", minimum=0)
        start = params.get("from", "end") or "end"
        if start not in STARTS:
            raise BadRequest(f"from takes beginning, end, offset or timestamp, got {start!r}")
        value: int | None = None
        if start == "offset":
            value = parse_int(params.get("offset"), "offset", minimum=0)
            if value is None:
                raise BadRequest("from=offset needs an offset")
        elif start == "timestamp":
            text = params.get("timestamp", "")
            if not text.strip():
                raise BadRequest("from=timestamp needs a timestamp")
            value = parse_timestamp(text)
        limit = parse_int(params.get("limit"), "limit", default=50, minimum=1) or 50
        limit = min(limit, MAX_LIMIT)
        fmt = params.get("format", "auto") or "auto"
        if fmt not in FORMATS:
            raise BadRequest(f"format takes {', '.join(FORMATS)}, got {fmt!r}")
        needle = params.get("filter", "")
        topic = await self.call(self.view.topic, name)
        # a search reads further than one page, and shows the first `limit` matches
        read = max(limit, SEARCH_SCAN) if needle else limit
        found = await self.call(self.view.read_messages, name, partition, start, value, read)
        scanned = len(found)
        if needle:
            found = [m for m in found if matches(m, needle, fmt, self.registry)][:limit]
        rows = [self.message_row(m, fmt) for m in found]
        query = {"partition": "" if partition is None else str(partition), "from": start,
                 "offset": params.get("offset", ""), "timestamp": params.get("timestamp", ""),
                 "limit": str(limit), "format": fmt, "filter": needle}
        return self.page(request, "messages.html", title=f"Messages of {name}", topic=topic,
                         rows=rows, query=query, formats=FORMATS, scanned=scanned,
                         searched=bool(needle))

    def message_row(self, message: Message, fmt: str) -> dict[str, Any]:
        key = render(message.key, fmt, self.registry)
        value = render(message.value, fmt, self.registry)
        return {
            "partition": message.partition, "offset": message.offset,
            "timestamp": timestamp_text(message.timestamp_ms),
            "timestamp_type": message.timestamp_type,
            "key": key.text, "key_format": key.format, "key_error": key.error,
            "value": value.text, "value_format": value.format, "value_error": value.error,
            "headers": [[k, header_text(v)] for k, v in message.headers],
        }

    async def groups(self, request: Request) -> Response:
        groups = await self.call(self.view.groups)
        return self.page(request, "groups.html", title="Consumer groups", groups=groups)

    async def group(self, request: Request) -> Response:
        group_id = request.path_params["group_id"]
        group = await self.call(self.view.group, group_id)
        topics = sorted({o.topic for o in group.offsets})
        total = sum(o.lag or 0 for o in group.offsets)
        return self.page(request, "group.html", title=f"Group {group_id}", group=group,
                         topics=topics, total_lag=total, modes=RESET_MODES,
                         has_history=self.history is not None)

    async def transactions(self, request: Request) -> Response:
        try:
            transactions = await self.call(self.view.transactions)
        except ConsoleError as exc:
            if isinstance(exc, NotFound):
                raise
            return self.page(request, "transactions.html", error_status(exc, False),
                             title="Transactions", transactions=[], unavailable=str(exc))
        return self.page(request, "transactions.html", title="Transactions",
                         transactions=transactions, unavailable=None)

    async def acls(self, request: Request) -> Response:
        try:
            acls = await self.call(self.view.acls)
        except ConsoleError as exc:
            # no authorizer is a fact about the cluster, not a failure of the page
            status = 200 if "authorizer" in str(exc).lower() else error_status(exc, False)
            return self.page(request, "acls.html", status, title="ACLs", acls=[],
                             unavailable=str(exc))
        return self.page(request, "acls.html", title="ACLs", acls=acls, unavailable=None)

    # -- JSON ----------------------------------------------------------------------------------

    async def api_series(self, request: Request) -> Response:
        name = request.query_params.get("name", "")
        if not name:
            return JSONResponse({"error": "name is required"}, status_code=400)
        points = self.history.series(name) if self.history is not None else []
        return JSONResponse({"name": name, "points": [[t, v] for t, v in points]})

    async def api_tail(self, request: Request) -> Response:
        """Messages past ``after`` (``p:offset,p:offset``: the next offset per partition);
        without ``after``, none and the current ends, so the next poll shows what arrives."""
        name = request.path_params["name"]
        params = request.query_params
        try:
            partition = parse_int(params.get("partition"), "partition", minimum=0)
            fmt = params.get("format", "auto") or "auto"
            if fmt not in FORMATS:
                raise BadRequest(f"format takes {', '.join(FORMATS)}")
            after = _parse_after(params.get("after", ""))
            needle = params.get("filter", "")
            if not after:
                topic = await self.call(self.view.topic, name)
                after = {p.partition: p.high_watermark or 0 for p in topic.partitions
                         if partition is None or p.partition == partition}
                found: list[Message] = []
            else:
                found = await self.call(self.view.tail, name, partition, after, 100, 1.0)
        except ConsoleError as exc:
            return JSONResponse({"error": str(exc)}, status_code=error_status(exc, False))
        for m in found:
            after[m.partition] = max(after.get(m.partition, 0), m.offset + 1)
        if needle:
            found = [m for m in found if matches(m, needle, fmt, self.registry)]
        return JSONResponse({
            "messages": [self.message_row(m, fmt) for m in found],
            "after": ",".join(f"{p}:{o}" for p, o in sorted(after.items())),
        })

    # -- login ---------------------------------------------------------------------------------

    async def login_page(self, request: Request) -> Response:
        if self.sessions is None:
            return self.redirect("/")
        nxt = _safe_next(request.query_params.get("next"))
        if request.method == "GET":
            return self.page(request, "login.html", title="Log in", next=nxt, failed=False)
        try:
            same_origin(request)
        except CrossSite as exc:
            return self.error(request, exc, True)
        form = await request.form()
        token = self.sessions.login(str(form.get("username", "")),
                                    str(form.get("password", "")))
        if token is None:
            return self.page(request, "login.html", 401, title="Log in",
                             next=_safe_next(str(form.get("next", ""))), failed=True)
        response = RedirectResponse(_safe_next(str(form.get("next", ""))), status_code=303)
        response.set_cookie(SESSION_COOKIE, token, httponly=True, samesite="strict",
                            secure=self.secure_cookie, path="/")
        return response

    async def logout(self, request: Request) -> Response:
        if self.sessions is not None:
            self.sessions.logout(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    # -- actions (POST, confirmed) -------------------------------------------------------------

    async def create_topic(self, request: Request) -> Response:
        form = await request.form()
        name = str(form.get("name", "")).strip()
        if not name:
            raise BadRequest("a topic needs a name")
        partitions = parse_int(str(form.get("partitions", "")), "partitions", default=1,
                               minimum=1) or 1
        rf = parse_int(str(form.get("replication_factor", "")), "replication factor",
                       default=-1)
        if rf is None or (rf < 1 and rf != -1):
            raise BadRequest("replication factor must be at least 1 (or -1: the default)")
        configs = dict(parse_lines(str(form.get("configs", "")), "configs"))
        if not confirmed(form):
            summary = [f"Create topic {name!r} with {partitions} partition(s), replication "
                       f"factor {'the broker default' if rf == -1 else rf}."]
            summary += [f"Config {k}={v}" for k, v in configs.items()] or ["No topic configs."]
            return self.confirm(request, form, title="Create topic", summary=summary,
                                button="Create topic")
        await self.call(self.view.create_topic, name, partitions, rf, configs or None)
        return self.redirect(topic_path(name), f"Created topic {name}.")

    async def delete_topic(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        if not confirmed(form):
            topic = await self.call(self.view.topic, name)
            messages = sum(p.messages or 0 for p in topic.partitions)
            return self.confirm(request, form, title=f"Delete topic {name}", danger=True,
                                summary=[f"Delete topic {name!r}: its {len(topic.partitions)} "
                                         f"partition(s) and {messages:,} message(s) are gone "
                                         "for good."], button="Delete topic")
        await self.call(self.view.delete_topic, name)
        return self.redirect("/topics", f"Deleted topic {name}.")

    async def add_partitions(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        total = parse_int(str(form.get("total", "")), "partitions", minimum=1)
        if total is None:
            raise BadRequest("give the new number of partitions")
        if not confirmed(form):
            topic = await self.call(self.view.topic, name)
            now = len(topic.partitions)
            if total <= now:
                raise BadRequest(f"topic {name} has {now} partitions: the new count must be "
                                 "larger (Kafka cannot remove partitions)")
            return self.confirm(request, form, title=f"Add partitions to {name}",
                                summary=[f"Grow topic {name!r} from {now} to {total} "
                                         "partitions. Keys may map to other partitions "
                                         "afterwards."], button="Add partitions")
        await self.call(self.view.add_partitions, name, total)
        return self.redirect(topic_path(name),
                             f"Topic {name} now has {total} partitions.")

    async def delete_records(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        partition = parse_int(str(form.get("partition", "")), "partition", minimum=0)
        offset = parse_int(str(form.get("offset", "")), "offset", minimum=0)
        topic = await self.call(self.view.topic, name)
        parts = [p for p in topic.partitions if partition is None or p.partition == partition]
        if not parts:
            raise NotFound(f"topic {name} has no partition {partition}")
        before: dict[int, int] = {}
        for p in parts:
            end = p.high_watermark or 0
            before[p.partition] = end if offset is None else min(offset, end)
        if not confirmed(form):
            rows = [[str(p.partition), human_count(p.log_start), str(before[p.partition]),
                     human_count(max(0, before[p.partition] - (p.log_start or 0)))]
                    for p in parts]
            return self.confirm(request, form, title=f"Delete records of {name}", danger=True,
                                summary=[f"Delete the records of topic {name!r} before these "
                                         "offsets: the log start offset moves up, the records "
                                         "below it are gone for good."],
                                columns=["partition", "log start now", "new log start",
                                         "records deleted"], rows=rows,
                                button="Delete records")
        result = await self.call(self.view.delete_records, name, before)
        text = ", ".join(f"partition {p}: log start {o}" for p, o in sorted(result.items()))
        return self.redirect(topic_path(name), f"Deleted records ({text}).")

    async def alter_configs(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        set_ = dict(parse_lines(str(form.get("set", "")), "configs to set"))
        delete = [k.strip() for k in re.split(r"[,\s]+", str(form.get("delete", "")))
                  if k.strip()]
        if not set_ and not delete:
            raise BadRequest("nothing to change: give key=value lines to set or keys to reset")
        if not confirmed(form):
            topic = await self.call(self.view.topic, name)
            current = {c.name: c for c in topic.configs}
            rows = []
            for key, value in set_.items():
                entry = current.get(key)
                rows.append([key, "–" if entry is None else str(entry.value), value])
            for key in delete:
                entry = current.get(key)
                rows.append([key, "–" if entry is None else str(entry.value),
                             "(the default)"])
            return self.confirm(request, form, title=f"Edit configs of {name}",
                                summary=[f"Change these configs of topic {name!r}; the broker "
                                         "validates them and may refuse."],
                                columns=["config", "now", "new"], rows=rows,
                                button="Apply configs")
        try:
            await self.call(self.view.alter_topic_configs, name, set_, delete)
        except NotFound:
            raise
        except ConsoleError as exc:
            # Kafka's validation error, on the topic's page with the form as it was typed
            topic = await self.call(self.view.topic, name)
            return self.topic_page(request, topic, error_status(exc, True),
                                   config_error=str(exc), config_set=str(form.get("set", "")),
                                   config_delete=str(form.get("delete", "")))
        return self.redirect(topic_path(name), "Configs updated.")

    async def produce(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        partition = parse_int(str(form.get("partition", "")), "partition", minimum=0)
        key_text = str(form.get("key", ""))
        value_text = str(form.get("value", ""))
        headers = parse_lines(str(form.get("headers", "")), "headers")
        key = key_text.encode() if key_text else None
        value = value_text.encode() if form.get("null_value") != "on" else None
        if not confirmed(form):
            where = "the partition the key maps to" if partition is None else \
                f"partition {partition}"
            summary = [f"Produce one message to topic {name!r}, {where}.",
                       f"Key: {key_text!r}" if key is not None else "Key: null",
                       f"Value: {len(value)} bytes" if value is not None else "Value: null"]
            summary += [f"Header {k}={v}" for k, v in headers]
            return self.confirm(request, form, title=f"Produce to {name}", summary=summary,
                                button="Produce")
        p, offset = await self.call(self.view.produce, name, partition, key, value,
                                    [(k, v.encode()) for k, v in headers])
        target = (f"{topic_path(name)}/messages?"
                  f"{urlencode({'partition': p, 'from': 'offset', 'offset': offset})}")
        return self.redirect(target, f"Produced to partition {p} at offset {offset}.")

    async def reset_offsets(self, request: Request) -> Response:
        group_id = request.path_params["group_id"]
        form = await request.form()
        topic = str(form.get("topic", "")).strip() or None
        mode = str(form.get("mode", ""))
        if mode not in RESET_MODES:
            raise BadRequest(f"mode takes {', '.join(RESET_MODES)}, got {mode!r}")
        value = str(form.get("value", "")).strip() or None
        if mode not in ("to-earliest", "to-latest", "to-current") and value is None:
            raise BadRequest(f"--{mode} needs a value")
        execute = confirmed(form)
        plan = await self.call(self.view.reset_offsets, group_id, topic, mode, value, execute)
        rows = [[r.topic, str(r.partition), human_count(r.current), str(r.new)] for r in plan]
        columns = ["topic", "partition", "current offset", "new offset"]
        what = f"--{mode}" + (f" {value}" if value else "")
        scope = f"topic {topic!r}" if topic else "every topic it has offsets for"
        if not execute:
            return self.confirm(request, form, title=f"Reset offsets of {group_id}",
                                summary=[f"Dry run: the committed offsets of group "
                                         f"{group_id!r} on {scope} would move ({what}) as "
                                         "below. Nothing has changed yet."],
                                columns=columns, rows=rows, button="Execute reset")
        return self.page(request, "result.html", title=f"Reset offsets of {group_id}",
                         summary=f"Reset the offsets of group {group_id!r} on {scope} "
                                 f"({what}).",
                         columns=columns, rows=rows,
                         back=f"/groups/{quote(group_id, safe='')}")

    async def delete_group(self, request: Request) -> Response:
        group_id = request.path_params["group_id"]
        form = await request.form()
        if not confirmed(form):
            group = await self.call(self.view.group, group_id)
            return self.confirm(request, form, title=f"Delete group {group_id}", danger=True,
                                summary=[f"Delete consumer group {group_id!r} ({group.state}) "
                                         f"and its {len(group.offsets)} committed offset(s). "
                                         "Kafka refuses while the group has members."],
                                button="Delete group")
        await self.call(self.view.delete_group, group_id)
        return self.redirect("/groups", f"Deleted group {group_id}.")


def topic_path(name: str) -> str:
    return f"/topics/{quote(name, safe='')}"


def confirmed(form: FormData) -> bool:
    """Whether an action's form came from its confirmation page (``Console.confirm``)."""
    return form.get("confirm") == "yes"


def _parse_after(text: str) -> dict[int, int]:
    after: dict[int, int] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        p, sep, o = item.partition(":")
        if not sep or not p.strip().isdigit() or not o.strip().isdigit():
            raise BadRequest(f"after takes partition:offset pairs, got {item!r}")
        after[int(p)] = int(o)
    return after


def _safe_next(target: str | None) -> str:
    """Only a path on this console (no other site, no //host) is a place to go after login."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


class CrossSite(ConsoleError):
    """A change asked for by a page of another site (HTTP 403)."""


def same_origin(request: Request) -> None:
    """Refuse a POST that a page of another site sent (its browser names that site in Origin):
    without it, any web page could post a confirmed form to a console on localhost."""
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise CrossSite(f"refused: a change asked for by a page of {origin}")


def _guard(console: Console, handler: Callable[[Request], Any], action: bool = False
           ) -> Callable[[Request], Any]:
    """A route handler whose ConsoleError becomes an error page (unexpected errors are left
    to the app's 500 handler). After an action the topics list is read anew."""

    async def endpoint(request: Request) -> Response:
        try:
            if action:
                same_origin(request)
            response: Response = await handler(request)
            return response
        except ConsoleError as exc:
            return console.error(request, exc, action)
        finally:
            if action and console.history is not None:
                console.history.forget_topics()

    return endpoint


def create_app(view: ClusterView, history: History | None = None,
               registry: SchemaRegistry | None = None, *, login: Mapping[str, str] | None = None,
               cluster_name: str = "", secure_cookie: bool = False,
               manage: bool = True) -> Starlette:
    """The console over ``view``. ``history`` (charts and rates) is started and stopped with the
    app when ``manage`` is true, which also closes ``view`` at shutdown. ``login``: user ->
    password; with it, every page asks for a login first (``secure_cookie``: served over
    HTTPS, so the session cookie is Secure)."""
    sessions = Sessions(login) if login else None
    console = Console(view, history, registry, sessions, cluster_name, secure_cookie)
    c = console
    routes = [
        Route("/", _guard(c, c.overview)),
        Route("/topics", _guard(c, c.topics)),
        Route("/topics/create", _guard(c, c.create_topic, True), methods=["POST"]),
        Route("/topics/{name}", _guard(c, c.topic)),
        Route("/topics/{name}/messages", _guard(c, c.messages)),
        Route("/topics/{name}/delete", _guard(c, c.delete_topic, True), methods=["POST"]),
        Route("/topics/{name}/partitions", _guard(c, c.add_partitions, True),
              methods=["POST"]),
        Route("/topics/{name}/delete-records", _guard(c, c.delete_records, True),
              methods=["POST"]),
        Route("/topics/{name}/configs", _guard(c, c.alter_configs, True), methods=["POST"]),
        Route("/topics/{name}/produce", _guard(c, c.produce, True), methods=["POST"]),
        Route("/groups", _guard(c, c.groups)),
        Route("/groups/{group_id}", _guard(c, c.group)),
        Route("/groups/{group_id}/reset-offsets", _guard(c, c.reset_offsets, True),
              methods=["POST"]),
        Route("/groups/{group_id}/delete", _guard(c, c.delete_group, True), methods=["POST"]),
        Route("/transactions", _guard(c, c.transactions)),
        Route("/acls", _guard(c, c.acls)),
        Route("/api/series", c.api_series),
        Route("/api/topics/{name}/tail", c.api_tail),
        Route("/login", c.login_page, methods=["GET", "POST"]),
        Route("/logout", c.logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        message = "No such page." if status == 404 else str(getattr(exc, "detail", exc))
        return c.page(request, "error.html", status, title="Error", message=message,
                      status=status)

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("console: %s %s failed", request.method, request.url.path, exc_info=exc)
        return c.page(request, "error.html", 500, title="Error", status=500,
                      message="Something went wrong in the console (see its log).")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manage and history is not None:
            history.start()
        try:
            yield
        finally:
            if manage:
                if history is not None:
                    await run_in_threadpool(history.stop)
                await run_in_threadpool(view.close)

    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={HTTPException: not_found, Exception: server_error})
    if sessions is not None:
        app.add_middleware(LoginRequired, sessions=sessions)
    app.state.console = console
    return app
