"""The names harnessmem's spans, attributes and metrics use (docs/observability.md lists them).

Where the OpenTelemetry GenAI semantic conventions (``semantic-conventions-genai``, status
Development) name a thing, their name is used: the memory operations, the inference span of
an upkeep model call, the token usage, the operation duration. What they do not name has a
``harnessmem.`` name.
"""

from __future__ import annotations

__all__: list[str] = []  # constants only; import the module

# -- GenAI conventions: operations (gen_ai.operation.name) and spans ---------------------------

SEARCH_MEMORY = "search_memory"
CREATE_MEMORY = "create_memory"
UPDATE_MEMORY = "update_memory"
DELETE_MEMORY = "delete_memory"
CHAT = "chat"

# -- GenAI conventions: attributes --------------------------------------------------------------

OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
CONVERSATION_ID = "gen_ai.conversation.id"
CONVERSATION_COMPACTED = "gen_ai.conversation.compacted"
MEMORY_STORE_ID = "gen_ai.memory.store.id"
MEMORY_RECORD_ID = "gen_ai.memory.record.id"
MEMORY_RECORD_COUNT = "gen_ai.memory.record.count"
MEMORY_QUERY_TEXT = "gen_ai.memory.query.text"
MEMORY_RECORDS = "gen_ai.memory.records"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
TOKEN_TYPE = "gen_ai.token.type"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
ERROR_TYPE = "error.type"

# -- GenAI conventions: metrics -----------------------------------------------------------------

#: Histogram, seconds: every memory operation and upkeep model call.
OPERATION_DURATION = "gen_ai.client.operation.duration"
#: Histogram, tokens: each upkeep model call's input and output tokens.
TOKEN_USAGE = "gen_ai.client.token.usage"

# -- harnessmem's own ---------------------------------------------------------------------------

#: Spans.
COMPACT = "harnessmem.compact"
MAINTENANCE = "harnessmem.maintenance"
#: Each maintenance step's span: ``harnessmem.maintenance.<step>``.
MAINTENANCE_STEP = "harnessmem.maintenance."
#: The span event of an evicted tool result (on the caller's span: its tool call's).
EVICTED = "harnessmem.tool_result.evicted"

#: Attributes.
OPERATION = "harnessmem.operation"
PURPOSE = "harnessmem.purpose"
FALLBACK = "harnessmem.fallback"
AUDIT_RECORD_ID = "harnessmem.audit.record_id"
SEARCH_VIA = "harnessmem.search.via"
SEARCH_SOURCE = "harnessmem.search.source"
SEARCH_MODE = "harnessmem.search.mode"
STATUS = "harnessmem.status"
TRIGGER = "harnessmem.trigger"
MESSAGES_BEFORE = "harnessmem.compaction.messages_before"
MESSAGES_AFTER = "harnessmem.compaction.messages_after"
TOKENS_BEFORE = "harnessmem.compaction.tokens_before"
TOKENS_AFTER = "harnessmem.compaction.tokens_after"
DROPPED = "harnessmem.compaction.dropped"
DEGRADED = "harnessmem.compaction.degraded"
POSTPONED = "harnessmem.compaction.postponed"
SUMMARY_SOURCE = "harnessmem.compaction.summary_source"
EVICTION_STAGE = "harnessmem.eviction.stage"
EVICTION_PATH = "harnessmem.eviction.path"
ORIGINAL_CHARS = "harnessmem.eviction.original_chars"
KEPT_CHARS = "harnessmem.eviction.kept_chars"
STEP_COUNT = "harnessmem.maintenance.count."
SKIPPED_REASON = "harnessmem.maintenance.skipped_reason"

#: Counters: ``{outcome}`` attributes say what happened.
COMPACTIONS = "harnessmem.compactions"
EVICTIONS = "harnessmem.evictions"
FLUSHES = "harnessmem.flushes"
CONSOLIDATIONS = "harnessmem.consolidations"
MAINTENANCE_STEPS = "harnessmem.maintenance.steps"
AUDIT_FAILURES = "harnessmem.audit.failures"
OUTCOME = "harnessmem.outcome"

#: Every counter, with its unit and description (the OpenTelemetry instrument's).
COUNTERS: dict[str, tuple[str, str]] = {
    COMPACTIONS: ("{compaction}", "Compactions, by trigger and outcome."),
    EVICTIONS: ("{result}", "Tool results moved to files, by stage."),
    FLUSHES: ("{flush}", "Flushes, by outcome (written, deferred, failed, ...)."),
    CONSOLIDATIONS: ("{consolidation}", "Consolidations, by outcome."),
    MAINTENANCE_STEPS: ("{step}", "Maintenance steps run, by step and outcome."),
    AUDIT_FAILURES: ("{append}", "Audit log appends that failed (each is retried)."),
}
