"""Replay a recorded conversation through a session, turn by turn, as an agent loop would.

:func:`load_transcript` reads a transcript file: a JSON list of OpenAI messages, JSON
Lines (one message a line), or any shape :func:`harnessmem.messages.normalize_messages`
knows (Anthropic messages, SWE-agent trajectories, a tau-bench run, a LoCoMo
conversation); :func:`read_transcript` also says which conversation of a LoCoMo file of
several it took (``sample``: a ``sample_id`` or a 0-based index; the first by default). A
file in none of these shapes is one ``MessageFormatError`` that lists the shapes and says
what the file looked like. :func:`replay` feeds the messages to
:class:`~harnessmem.harness.Session` the way a live agent would have:

- before each assistant message (the model call): ``before_reasoning`` (eviction sweep,
  compaction; the returned list becomes the context);
- each tool message: ``after_tool(call, output)`` (oversized outputs go to a file);
- at the end of each agent call (the next user or system message, and the end of the
  file): ``after_call`` (the flush into today's daily log);
- when the day changes: ``Session.close`` first, at the last moment of the old day, so
  that what the flush's batching held back is written to that day's log; then
  ``harness.consolidate()``, as the maintenance scheduler would overnight; and at the end.

A transcript without any assistant message (people talking among themselves, such as a
LoCoMo conversation) is replayed as if the agent read along: ``before_reasoning`` runs at
the end of each agent call (each message), counted as a model call, so compaction keeps
the context bounded and the raw messages reach the session log.

Messages may carry a ``timestamp`` (ISO 8601, or seconds since the epoch; a time without
an offset is read in ``workspace.timezone``): the harness clock then follows them, so
daily logs are named by the days the conversation spans.
By default the dates are shifted by whole days so that the last message falls within the
past 24 hours (an old transcript's logs would otherwise be archived by the next
maintenance tick); times of day stay as written; ``keep_dates=True`` keeps the dates.
The session gets each message with its timestamp shifted likewise, so that the session
log and the daily logs agree on the day a thing was said (``ReplayReport.shifted_by``
says by how much).
What happened comes back as a :class:`ReplayReport`: one :class:`ReplayEvent` per
compaction, flush, eviction and consolidation.

Replay into a workspace no live agent is writing to: while the clock follows old
timestamps, the leases the harness takes look expired to other processes.
"""

from harnessmem.messages import message_time
from harnessmem.replay.files import Transcript, load_transcript, read_transcript
from harnessmem.replay.report import ReplayEvent, ReplayReport, merge_reports
from harnessmem.replay.run import ReplayClock, replay

__all__ = [
    "ReplayClock",
    "ReplayEvent",
    "ReplayReport",
    "Transcript",
    "load_transcript",
    "merge_reports",
    "message_time",
    "read_transcript",
    "replay",
]
