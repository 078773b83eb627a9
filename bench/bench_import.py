"""Cold start of harnessmem against ``import pydantic, pluggy``.

``import harnessmem`` is lazy (PEP 562), so the row that imports the public API
(``MemoryHarness``, ``HarnessSettings``) is the one an application pays.

Each figure is the median wall time of a fresh interpreter, so interpreter
start-up is inside both the measurement and the baseline; the net rows
subtract a bare ``python -c pass`` measured in the same run. The commands take turns
(one sample of each per round), so a burst of load hits them alike. Every module, ours
and the baselines', loads compiled bytecode as an installed package does: an untimed first
round compiles them into a cache of the run (``PYTHONPYCACHEPREFIX``; see ``_compiled``).

The ``harnessmem chat`` rows are what a user waits for before the prompt or the error:
``chat --help``, and a chat whose model key is missing (it fails with exit status 3 before
litellm is imported); ``import litellm`` with its bundled price list is what both would
cost if they loaded it. These rows run in an empty folder, without ``HARNESSMEM_*``
variables or the key, against the bare interpreter start.

The ``harnessmem mcp`` row is what an MCP client waits for when it starts the server over
stdio: from the start of the process to the server's answer to ``initialize`` (the MCP SDK
imported, the settings read, the harness opened), against ``harnessmem --help`` of the same
run. It needs the ``mcp`` extra and is left out without it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench._util import Row


@dataclass(frozen=True)
class _Command:
    argv: list[str]
    env: dict[str, str] | None = None
    cwd: str | None = None
    status: int = 0  # the exit status the command must end with
    rounds: int | None = None  # sample only in the first rounds (a slow command)
    request: bytes | None = None  # a line for stdin: timed to the first line of the answer


#: The MCP handshake's first request, as a client sends it over stdio.
_INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
    ).encode()
    + b"\n"
)


def _answer_time(command: _Command) -> tuple[float, int, bytes]:
    """Seconds from the start of the process to the first line it answers ``request``
    with; then stdin is closed and the process ends (its status and stderr returned)."""
    assert command.request is not None
    start = time.perf_counter()
    process = subprocess.Popen(
        command.argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=command.env,
        cwd=command.cwd,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(command.request)
    process.stdin.flush()
    answer = process.stdout.readline()
    elapsed = time.perf_counter() - start
    _, errors = process.communicate(timeout=60)  # closes stdin: the server ends
    if b'"result"' not in answer:
        raise RuntimeError(f"{' '.join(command.argv)} answered {answer[:300]!r}")
    return elapsed, process.returncode, errors


def _cold(commands: dict[str, _Command], repeat: int) -> dict[str, float]:
    """Median wall time of each command in a fresh process; the commands take turns."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(repeat):
        for name, command in commands.items():
            if command.rounds is not None and round_ >= command.rounds:
                continue
            if command.request is not None:
                elapsed, status, errors = _answer_time(command)
            else:
                start = time.perf_counter()
                done = subprocess.run(
                    command.argv, capture_output=True, env=command.env, cwd=command.cwd
                )
                elapsed, status, errors = time.perf_counter() - start, done.returncode, done.stderr
            samples[name].append(elapsed)
            if status != command.status:
                raise RuntimeError(
                    f"{' '.join(command.argv)} exited {status}, not {command.status}: "
                    f"{errors.decode(errors='replace')[-500:]}"
                )
    return {name: statistics.median(values) for name, values in samples.items()}


def _compiled(env: dict[str, str] | None, cache: str) -> dict[str, str]:
    """``env`` (None: this process's) with every module's bytecode kept in ``cache``.

    An installed package loads compiled files (pip compiles them at install, and Python
    writes them on the first import of an editable one); with PYTHONDONTWRITEBYTECODE set,
    as on some machines, each cold process would compile harnessmem's sources again while
    third-party packages load the files pip compiled. With PYTHONPYCACHEPREFIX every
    module, ours and theirs, is compiled once into ``cache`` (the untimed first round) and
    loaded from there after.
    """
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def _offline_env() -> dict[str, str]:
    """No harnessmem settings, no model key; litellm on its bundled price list."""
    keys = ("OPENAI_API_KEY", "HARNESSMEM_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(keys)}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / "harnessmem"
    if script.exists():
        return [str(script)]
    found = shutil.which("harnessmem")
    if found:
        return [found]
    return [sys.executable, "-m", "harnessmem.cli"]


def run(quick: bool) -> list[Row]:
    """Rows for the cold imports, ``harnessmem --help``, the start of ``harnessmem chat`` and
    of ``harnessmem mcp``."""
    repeat = 5 if quick else 15
    python = sys.executable
    script = _console_script()
    with tempfile.TemporaryDirectory(prefix="bench-import-") as scratch:
        env = _offline_env()
        workspace = str(Path(scratch) / "ws")
        mcp: dict[str, _Command] = {}
        if importlib.util.find_spec("mcp") is not None:
            mcp["mcp"] = _Command(
                [*script, "mcp", "-w", str(Path(scratch) / "mcp-ws")],
                env,
                scratch,
                request=_INITIALIZE,
            )
            # What the server cannot start without: the official SDK's server and transport.
            mcp["mcp_sdk"] = _Command(
                [python, "-c", "import mcp.server.lowlevel, mcp.server.stdio"]
            )
        commands = {
            "bare": _Command([python, "-c", "pass"]),
            "baseline": _Command([python, "-c", "import pydantic, pluggy"]),
            # HarnessSettings is a BaseSettings: the floor of the API's import.
            "settings_base": _Command([python, "-c", "import pydantic_settings, pluggy"]),
            "ours": _Command([python, "-c", "import harnessmem"]),
            "api": _Command(
                [python, "-c", "from harnessmem import MemoryHarness, HarnessSettings"]
            ),
            "cli": _Command([*script, "--help"]),
            "chat_help": _Command([*script, "chat", "--help"], env, scratch),
            "chat_no_key": _Command(
                [*script, "chat", "-m", "openai/gpt-4o-mini", "-w", workspace],
                env,
                scratch,
                status=3,
            ),
            # Seconds a sample: a few samples say what chat no longer pays.
            "litellm": _Command(
                [python, "-c", "import litellm"], env, scratch, rounds=2 if quick else 5
            ),
            **mcp,
        }
        cache = str(Path(scratch) / "bytecode")
        commands = {
            name: dataclasses.replace(command, env=_compiled(command.env, cache))
            for name, command in commands.items()
        }
        _cold(commands, 1)  # compiles every module once (see _compiled); not timed
        times = _cold(commands, repeat)
        if Path(workspace).exists():
            raise RuntimeError("a chat that fails on its key created the workspace")
    bare, baseline, ours, api, cli = (times[k] for k in ("bare", "baseline", "ours", "api", "cli"))
    base_name = "import pydantic, pluggy"
    bare_name = "python -c pass"
    rows = [
        Row("import", "import harnessmem (cold process)", ours, "s", base_name, baseline),
        Row(
            "import",
            "from harnessmem import MemoryHarness, HarnessSettings (cold process)",
            api,
            "s",
            base_name,
            baseline,
            notes="loads the settings models, the plugin manager and the harness",
        ),
        Row(
            "import",
            "import pydantic_settings, pluggy (cold process)",
            times["settings_base"],
            "s",
            base_name,
            baseline,
            notes="what HarnessSettings (a pydantic-settings BaseSettings) cannot start without",
        ),
        Row("import", "harnessmem --help (cold process)", cli, "s", base_name, baseline),
        Row(
            "import",
            "import harnessmem, net of interpreter start",
            ours - bare,
            "s",
            f"{base_name}, net",
            baseline - bare,
            notes=f"bare interpreter start {bare * 1000:.1f} ms",
        ),
        Row(
            "import",
            "harnessmem chat --help (cold process)",
            times["chat_help"],
            "s",
            bare_name,
            bare,
        ),
        Row(
            "import",
            "harnessmem chat without its API key, to the error (cold process)",
            times["chat_no_key"],
            "s",
            bare_name,
            bare,
            notes="-m openai/gpt-4o-mini, no OPENAI_API_KEY: exit status 3, litellm not imported",
        ),
        Row(
            "import",
            "import litellm, bundled price list (cold process)",
            times["litellm"],
            "s",
            bare_name,
            bare,
            notes="what chat would pay before its prompt or its error if it imported litellm",
        ),
    ]
    if "mcp" in times:
        rows.append(
            Row(
                "import",
                "harnessmem mcp over stdio, to its answer to initialize (cold process)",
                times["mcp"],
                "s",
                "harnessmem --help",
                cli,
                notes=f"{times['mcp'] - cli:+.2f} s over --help (goal: +0.5 s); "
                "imports the MCP SDK and opens the harness",
            )
        )
        rows.append(
            Row(
                "import",
                "import mcp.server.lowlevel, mcp.server.stdio (cold process)",
                times["mcp_sdk"],
                "s",
                "harnessmem --help",
                cli,
                notes=f"{times['mcp_sdk'] - cli:+.2f} s over --help: the MCP SDK alone, "
                "the floor of the row above",
            )
        )
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
