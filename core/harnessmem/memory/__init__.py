"""What the agent remembers: the flush of facts into daily logs, their consolidation into
MEMORY.md, the memory block of the system prompt, session transcripts and the redaction of
secrets from everything written.

Modules: :mod:`~harnessmem.memory.flush`, :mod:`~harnessmem.memory.consolidation`,
:mod:`~harnessmem.memory.context`, :mod:`~harnessmem.memory.transcripts`,
:mod:`~harnessmem.memory.redaction`; the ``_``-prefixed ones serve them only.
"""
