"""Two harnesses in two processes on one workspace and one database (two replicas).

A fact flushed by one replica is found by the other's ``search`` at once, without a
rebuild, and the other replica does not index the file a second time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.postgres

_REPLICA = textwrap.dedent(
    """
    import json
    import sys

    from harnessmem import MemoryHarness
    from harnessmem.testing import ScriptedModel

    root, options = sys.argv[1], json.loads(sys.argv[2])

    def reply(messages, purpose):
        # The flush model: the user's last words, as one fact.
        return "- " + messages[-1]["content"].rsplit("remember: ", 1)[-1].split("\\n")[0]

    with MemoryHarness.open(
        root,
        model=ScriptedModel(reply),
        index={"backend": "postgres", "options": options},
        maintenance={"enabled": False},
        config=None,
    ) as harness:
        print(json.dumps("ready"), flush=True)
        for line in sys.stdin:
            command, _, argument = line.rstrip("\\n").partition(" ")
            if command == "search":
                out = [[h.path, h.start_line, h.content] for h in harness.search(argument)]
            elif command == "flush":
                messages = [{"role": "user", "content": f"please remember: {argument}"}]
                result = harness.flush(messages, session_id="chat-1")
                out = {"status": result.status, "path": result.path}
            elif command == "reindex":
                result = harness.reindex()
                out = {"indexed": result.indexed, "checked": result.checked}
            else:
                break
            print(json.dumps(out), flush=True)
    """
)


class Replica:
    """One harness in its own Python process, driven one command a line."""

    def __init__(self, root: Path, options: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _REPLICA, str(root), json.dumps(options)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._answer() == "ready"

    def _answer(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            _, err = self.proc.communicate(timeout=60)
            pytest.fail(f"replica exited with {self.proc.returncode}:\n{err}")
        return json.loads(line)

    def ask(self, command: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.proc.poll() is None:
            _, err = self.proc.communicate("quit\n", timeout=60)
            assert self.proc.returncode == 0, err


@pytest.fixture
def replicas(tmp_path: Path, pg_options: dict[str, Any]) -> Iterator[tuple[Replica, Replica]]:
    root = tmp_path / "ws"
    root.mkdir()
    # No workspace_id: both derive it from the workspace URL, as replicas do.
    options = {key: value for key, value in pg_options.items() if key != "workspace_id"}
    one = Replica(root, options)
    try:
        two = Replica(root, options)
    except BaseException:
        one.proc.kill()
        one.proc.communicate()
        raise
    yield one, two
    for replica in (one, two):
        replica.close()


def test_a_fact_flushed_by_one_replica_is_found_by_the_other(
    replicas: tuple[Replica, Replica], pg_sql: Any, pg_schema: str
) -> None:
    one, two = replicas
    assert two.ask("search flowerpot") == [], "nothing yet; the other replica has searched"
    flushed = one.ask("flush the spare key is under the blue flowerpot")
    assert flushed["status"] == "written"
    rows = f'SELECT e.id, f.indexed_at FROM "{pg_schema}".entries e JOIN "{pg_schema}".files f USING (workspace_no, path) ORDER BY e.id'  # noqa: E501
    written = pg_sql(rows)
    assert written, "the flushing replica indexed its write"

    hits = two.ask("search flowerpot")
    assert [(path, content) for path, _, content in hits] == [
        (flushed["path"], "- the spare key is under the blue flowerpot")
    ]
    assert pg_sql(rows) == written, "found without indexing the file again"
    assert two.ask("reindex")["indexed"] == 0

    # And the other way round, with both logs now being appended to.
    assert two.ask("flush the boiler is serviced every March")["status"] == "written"
    (hit,) = one.ask("search boiler serviced")
    assert hit[2] == "- the boiler is serviced every March"
    assert one.ask("reindex")["indexed"] == 0
    assert [h[2] for h in one.ask("search flowerpot")] == [
        "- the spare key is under the blue flowerpot"
    ]
