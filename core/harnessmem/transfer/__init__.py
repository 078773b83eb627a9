"""Moving a workspace: export to one archive, import it elsewhere, import the Java harness's.

**The archive** is a gzipped tar file: every file of the workspace under ``workspace/``
(``MEMORY.md``, the daily logs and their archive, the session logs and their marks, the
evicted tool results, the consolidation watermark, ``MEMORY.md``'s history, maintenance
state and usage records; not ``.locks/`` and not the index, which is derived data), and a
manifest ``harnessmem-export.json`` as the last member::

    {"format": "harnessmem-export", "version": 1, "workspace": "s3://bucket/agents/a",
     "exported_at": "2026-11-30T09:15:02Z",
     "files": [{"path": "MEMORY.md", "size": 1234, "sha256": "9f2c..."}, ...]}

Any tar tool opens it. :func:`export_workspace` reads each file once and writes the
archive beside its destination, renaming it into place when it is complete, so a crash
never leaves a torn archive under the name asked for.

:func:`import_archive` checks the whole archive before it writes anything: the manifest,
every member's path (confined as ``memory_get`` confines paths; no file that is also the
folder of another) and SHA-256, every path against the store's limits on names, and every
file the workspace already holds at a path the archive brings (the same bytes: skipped;
different bytes, or a file where the archive has a folder or the other way round: a
conflict, and nothing is imported). Each file is then written atomically, so an import
stopped half-way is finished by running it again. The archive is streamed, never held
whole: each member's header is checked against the ``transfer`` settings (the unpacked
total and its ratio to the archive's size) before its bytes are read, and at most one
file's bytes are in memory at a time.

:func:`import_java_workspace` reads a workspace the AgentScope Java harness wrote
(``<root>/MEMORY.md``, ``memory/YYYY-MM-DD.md`` and ``memory/archive/``,
``memory/.consolidation_state``, ``agents/<agent>/sessions/<id>.log.jsonl``,
``large_tool_results/``; with per-user isolation all of it but ``large_tool_results`` under
``<root>/<user>/``). Memory files are taken as they are: harnessmem reads the Java daily
logs' ``## Memory Flush — <instant>`` headings and its watermark's bare ISO instant. Session
logs are converted (:func:`harnessmem.messages.from_java_session_log`) and written through
the session transcript, so each line passes the secret redactor and the exactly-once
bookkeeping holds; importing the same logs again adds nothing. Files that are not memory
(``AGENTS.md``, ``knowledge/``, ``skills/``, ...) are listed in the result and left out.
"""

from harnessmem.transfer.archive import (
    MANIFEST_LIMIT,
    RATIO_FLOOR,
    Archive,
    ArchivedFile,
    import_archive,
    read_archive,
)
from harnessmem.transfer.export import FORMAT, MANIFEST, VERSION, ExportResult, export_workspace
from harnessmem.transfer.java import JavaWorkspace, import_java_workspace, read_java_workspace
from harnessmem.transfer.plan import ImportResult

__all__ = [
    "FORMAT",
    "MANIFEST",
    "MANIFEST_LIMIT",
    "RATIO_FLOOR",
    "VERSION",
    "Archive",
    "ArchivedFile",
    "ExportResult",
    "ImportResult",
    "JavaWorkspace",
    "export_workspace",
    "import_archive",
    "import_java_workspace",
    "read_archive",
    "read_java_workspace",
]
