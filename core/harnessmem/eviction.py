"""Tool-result eviction: huge tool output goes to a file, the conversation keeps head + tail.

:class:`ToolResultEvictor` is a built-in hook plugin (entry point ``eviction`` in the
``harnessmem.plugins`` group), registered exactly as a third-party plugin would be:

- ``post_acting`` (``Session.after_tool``): each result is inspected once, right after the
  tool ran, before it ever enters the conversation;
- ``pre_reasoning`` (``Session.before_reasoning``): a sweep for tool messages that reached
  the conversation without passing ``after_tool`` (agents that skip it, restored
  transcripts). The tool name comes from the assistant tool call that the message answers.

A result longer than ``eviction.max_result_chars`` from a tool not in
``eviction.excluded_tools`` is written to
``<eviction.path>/<safe session id>/<safe call id>-<content hash>.txt`` and replaced by its
first and last ``eviction.preview_chars`` characters with one line between them that says
how much was left out, where the whole output is and how to read it.

Secrets: the full text passes through ``transform_memory_text(text, "eviction")`` before
it is written, like every other text harnessmem persists, so an installed redactor keeps
credentials a tool printed (``env``, ``cat .env``) out of the workspace, which may be a
shared bucket. The preview is cut from the same transformed text, so what the agent sees
matches the file line for line.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from harnessmem.encoding import content_hash
from harnessmem.errors import ConfigError
from harnessmem.events import ToolResultEvictedEvent
from harnessmem.layout import eviction_path
from harnessmem.messages import Follower, pair_tool_calls, text_only
from harnessmem.plugins import hookimpl
from harnessmem.telemetry import names

if TYPE_CHECKING:
    from harnessmem.events import TurnContext
    from harnessmem.kernel import Kernel
    from harnessmem.settings import EvictionSettings, HarnessSettings

__all__ = ["EvictedResult", "ToolResultEvictor", "eviction_path", "placeholder"]

logger = logging.getLogger("harnessmem.eviction")

#: Opens the line that replaces the middle of an evicted result. Only length decides what
#: is evicted (a placeholder is far below the threshold), so a real output that happens to
#: contain this text is still evicted when it is too long.
MARKER = "[harnessmem: "
# Paths this process wrote or found recently: a transcript kept unevicted by the caller is
# swept on every turn, and this spares a storage round trip per turn for it.
_KNOWN_PATHS = 1024
# Placeholders of recent evictions by (session, call id, hash of the original output): a
# re-sent message costs one hash instead of a redaction pass over 100,000+ characters.
_PLACEHOLDERS = 256
# Sessions whose previous sweep is remembered, so that the next sweeps only what changed.
_SWEPT_SESSIONS = 256


def _renew_after(settings: EvictionSettings) -> float:
    """Age after which a file is written again on re-eviction: half the retention."""
    return settings.retention_days * 86400 / 2


#: One tool result moved to a file (``ctx.outcomes["eviction"]`` lists them per call): the
#: event the ``on_tool_result_evicted`` observers get.
EvictedResult = ToolResultEvictedEvent


def placeholder(text: str, path: str, preview_chars: int) -> str:
    """Head and tail of ``text`` around one line saying what was cut, where, how to read it."""
    keep = min(preview_chars, len(text) // 2)
    head, tail = text[:keep], text[len(text) - keep :] if keep else ""
    total_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    first_cut = head.count("\n") + 1  # the line the head stops in
    last_cut = text.count("\n", 0, len(text) - keep) + 1  # the line the tail starts in
    left_out = len(text) - 2 * keep
    note = (
        f"{MARKER}{left_out:,} of {len(text):,} characters left out here (lines {first_cut:,}"
        f"-{last_cut:,} of {total_lines:,}). The whole output is saved at `{path}`: read it "
        f"with memory_get (start_line {first_cut} for the part left out) or your read_file tool.]"
    )
    return f"{head}\n{note}\n{tail}" if keep else note


def _tool_name_of(
    messages: Sequence[Mapping[str, Any]], index: int, parents: Mapping[int, int]
) -> str:
    """Name of the tool whose result is ``messages[index]``, from the call it answers."""
    message = messages[index]
    parent = parents.get(index)
    if parent is not None:
        for call in messages[parent].get("tool_calls") or ():
            if isinstance(call, Mapping) and call.get("id") == message.get("tool_call_id"):
                function = call.get("function")
                if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                    return str(function["name"])
    name = message.get("name")  # some agents name the tool on the result itself
    return name if isinstance(name, str) else ""


class ToolResultEvictor:
    """Built-in plugin that moves oversized tool results to workspace files.

    Instantiated with no arguments, once per harness; settings arrive through
    ``harnessmem_configure`` and the harness through each hook's ``ctx``.
    """

    name = "eviction"

    def __init__(self) -> None:
        self.settings: EvictionSettings | None = None
        self._known: OrderedDict[str, float] = OrderedDict()
        self._replaced: OrderedDict[tuple[str, str, str], tuple[str, str]] = OrderedDict()
        self._swept: OrderedDict[str, Follower] = OrderedDict()
        self._swept_lock = threading.Lock()

    @hookimpl
    def harnessmem_configure(self, settings: HarnessSettings) -> None:
        """Keep the eviction settings; refuse ones under which eviction cannot shrink text."""
        eviction = settings.eviction  # eviction.path is checked by EvictionSettings itself
        if eviction.enabled and 2 * eviction.preview_chars >= eviction.max_result_chars:
            raise ConfigError(
                f"eviction.preview_chars ({eviction.preview_chars}) keeps head and tail, so it "
                f"must be less than half of eviction.max_result_chars "
                f"({eviction.max_result_chars}); evicting would not shorten anything",
                hint="lower eviction.preview_chars or raise eviction.max_result_chars",
            )
        self.settings = eviction

    def _settings(self, ctx: TurnContext) -> EvictionSettings:
        return self.settings if self.settings is not None else ctx.settings.eviction

    def _wants(self, settings: EvictionSettings, tool_name: str, text: str) -> bool:
        return (
            settings.enabled
            and len(text) > settings.max_result_chars
            and tool_name not in settings.excluded_tools
        )

    # hooks ----------------------------------------------------------------------------------

    @hookimpl(trylast=True)
    def post_acting(self, ctx: TurnContext, call: dict[str, Any], result: str) -> None:
        """Evict the result of ``call`` when it is too long (runs after other plugins)."""
        settings = self._settings(ctx)
        text = ctx.tool_result if ctx.tool_result is not None else result
        function = call.get("function")
        tool_name = function.get("name") if isinstance(function, Mapping) else None
        tool_name = tool_name if isinstance(tool_name, str) else ""
        evicted = self._evict_wanted(ctx, settings, text, tool_name, call.get("id"), "post_acting")
        if evicted is not None:
            ctx.tool_result = evicted[0]

    @hookimpl(tryfirst=True)
    def pre_reasoning(self, ctx: TurnContext) -> None:
        """Evict oversized tool messages that bypassed ``after_tool`` (before compaction runs)."""
        settings = self._settings(ctx)
        if not settings.enabled:
            return
        messages = ctx.messages
        limit = settings.max_result_chars
        # Only the positions that may have changed since this session's previous sweep are
        # looked at again (see Follower), and the ones that were too long then: a caller
        # that keeps its raw history sends them again, to be evicted again.
        follower = self._follower(ctx.session_id)
        look = follower.look(messages, ctx.changes)
        pairs: Iterable[tuple[int, Any]]
        if look.positions is not None and look.kept is not None and look.kept[0] == limit:
            count = len(messages)
            again = [i for i in look.kept[1] if i < count]
            positions = sorted({*look.positions, *again}) if again else look.positions
            pairs = [(i, messages[i]) for i in positions]
        else:
            pairs = enumerate(messages)
        # One length check per message; the pairing is built only when something is too long.
        # The common case (a dict with string content) is tested first: isinstance against
        # the Mapping ABC alone costs several times the length check itself.
        candidates = [
            i
            for i, m in pairs
            if (isinstance(m, dict) or isinstance(m, Mapping))  # noqa: SIM101 - a tuple is slower
            and m.get("role") == "tool"
            and (
                len(body) > limit
                if isinstance(body := m.get("content"), str)
                else len(text_only(body) or "") > limit
            )
        ]
        follower.saw(look, (limit, candidates))
        if not candidates:
            return
        parents = pair_tool_calls(messages).parents
        for index in candidates:
            message = messages[index]
            text = text_only(message.get("content")) or ""
            tool_name = _tool_name_of(messages, index, parents)
            call_id = message.get("tool_call_id")
            evicted = self._evict_wanted(ctx, settings, text, tool_name, call_id, "pre_reasoning")
            if evicted is None:
                continue
            content: Any = evicted[0]
            if isinstance(message.get("content"), list):
                content = [{"type": "text", "text": evicted[0]}]
            # A new dict: the message objects still belong to the caller.
            messages[index] = {**message, "content": content}

    # the work -------------------------------------------------------------------------------

    def _follower(self, session_id: str) -> Follower:
        """What the previous sweep of ``session_id`` saw (recent sessions only)."""
        with self._swept_lock:
            follower = self._swept.pop(session_id, None) or Follower()
            self._swept[session_id] = follower
            while len(self._swept) > _SWEPT_SESSIONS:
                self._swept.popitem(last=False)
            return follower

    def _evict_wanted(
        self,
        ctx: TurnContext,
        settings: EvictionSettings,
        text: str,
        tool_name: str,
        call_id: object,
        stage: str,
    ) -> tuple[str, EvictedResult] | None:
        """:meth:`_evict` when the settings want ``text`` of ``tool_name`` evicted."""
        if not self._wants(settings, tool_name, text):
            return None
        return self._evict(
            ctx, settings, text, tool_name, call_id if isinstance(call_id, str) else "", stage
        )

    def _evict(
        self,
        ctx: TurnContext,
        settings: EvictionSettings,
        text: str,
        tool_name: str,
        call_id: str,
        stage: str,
    ) -> tuple[str, EvictedResult] | None:
        """Store ``text`` and return (placeholder, record); None leaves the result as it was."""
        kernel = ctx.kernel
        now = kernel.clock()
        key = (
            ctx.session_id,
            call_id,
            content_hash(text.encode("utf-8", "surrogatepass")),
        )
        cached = self._replaced.get(key)
        try:
            if cached is not None and self._seen_recently(cached[0], now, settings):
                # The same message again (a caller that keeps its raw history): no
                # transform, no hashing of the stored text, no storage round trip.
                self._replaced.move_to_end(key)
                (path, short), written = cached, False
            else:
                stored = kernel.hooks.transform_memory_text(text, "eviction")
                path = eviction_path(settings.path, ctx.session_id, call_id, stored)
                written = self._store(kernel, path, stored, settings)
                short = placeholder(stored, path, settings.preview_chars)
                self._replaced[key] = (path, short)
                while len(self._replaced) > _PLACEHOLDERS:
                    self._replaced.popitem(last=False)
        except Exception as exc:
            # Keeping the full result is the safe failure: the context may overflow (and be
            # recovered), but nothing the tool produced is lost.
            logger.warning(
                "eviction of a %d-char %s result (session %s, call %s) failed; kept it whole: %s",
                len(text),
                tool_name or "tool",
                ctx.session_id,
                call_id,
                exc,
            )
            return None
        record = EvictedResult(
            ctx.session_id, tool_name, call_id, path, len(text), len(short), written, stage
        )
        ctx.outcomes.setdefault("eviction", []).append(record)
        # An event on the caller's span: the tool call's, when the agent traces its tools.
        telemetry = kernel.telemetry
        telemetry.current().add_event(
            names.EVICTED,
            {
                names.TOOL_NAME: tool_name,
                names.TOOL_CALL_ID: call_id or None,
                names.EVICTION_PATH: path,
                names.ORIGINAL_CHARS: len(text),
                names.KEPT_CHARS: len(short),
                names.EVICTION_STAGE: stage,
            },
        )
        telemetry.count(names.EVICTIONS, 1, {names.EVICTION_STAGE: stage})
        kernel.hooks.tool_result_evicted(record)
        return short, record

    def _store(self, kernel: Kernel, path: str, text: str, settings: EvictionSettings) -> bool:
        """Write ``text`` to ``path`` unless it is already there; True when this call wrote it.

        The name holds a hash of the content, so an existing file already has these bytes.
        A new file is created only if absent (``If-None-Match`` on S3, a file lock
        locally), so racing evictions of one result in several processes or replicas write
        it once. An existing file older than half the retention is written again (same
        bytes) to renew its age: a live conversation points at it, and maintenance must
        not prune it from under it.
        """
        workspace = kernel.workspace
        now = kernel.clock()
        if self._seen_recently(path, now, settings):
            return False
        modified = self._modified(kernel, path)
        if modified is not False and (modified is None or now - modified < _renew_after(settings)):
            self._remember(path, now)
            return False
        if modified is not False:
            workspace.write_text(path, text)  # renew: same bytes, so racing renewals agree
            written = True
        else:
            written = workspace.create_text(path, text)
        self._remember(path, now)
        return written

    def _seen_recently(self, path: str, now: float, settings: EvictionSettings) -> bool:
        """Whether this process wrote or found ``path`` recently enough to skip checking."""
        seen = self._known.get(path)
        if seen is None or now - seen >= _renew_after(settings):
            return False
        self._known.move_to_end(path)
        return True

    @staticmethod
    def _modified(kernel: Kernel, path: str) -> float | Literal[False] | None:
        """When ``path`` was last written (None: the store does not say); False: missing."""
        try:
            return kernel.workspace.info(path).modified
        except FileNotFoundError:
            return False

    def _remember(self, path: str, now: float) -> None:
        self._known[path] = now
        self._known.move_to_end(path)
        while len(self._known) > _KNOWN_PATHS:
            self._known.popitem(last=False)
