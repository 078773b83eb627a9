"""A new user's first hour, end to end: clone the repository into an empty folder (no
``../shared`` beside it), run the README's set-up and test commands and the quick benchmark run.

It builds a whole environment, so it runs only where ``HARNESSMEM_CLEAN_CLONE=1`` asks for it:
``.ci/run`` sets it. The run inside the clone does not set it, so the test does not recurse.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("HARNESSMEM_CLEAN_CLONE") != "1",
        reason="builds a fresh clone and environment; set HARNESSMEM_CLEAN_CLONE=1 (.ci/run does)",
    ),
]


def _readme_command(marker: str) -> str:
    """The command in the README block after ``<!-- marker -->`` (as .ci/run reads it)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"<!-- {marker} -->\n```bash\n(.*?)\n```", readme, flags=re.DOTALL)
    assert match, f"README has no {marker} command"
    return match.group(1)


def _run(command: str, cwd: Path, env: dict[str, str], timeout: int) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{command!r} failed in the clean clone:\n{output[-6000:]}"
    return output


def test_a_clean_clone_sets_up_passes_its_tests_and_benchmarks(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout to clone from")
    clone = tmp_path / "harnessmem"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    assert not (clone.parent / "shared").exists()

    env = {key: value for key, value in os.environ.items() if not key.startswith("HARNESSMEM_")}
    env.pop("SHARED_DATA_DIR", None)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        part for part in env.get("PATH", "").split(os.pathsep) if ".venv" not in part
    )

    _run(_readme_command("setup"), clone, env, timeout=900)
    tested = _run(_readme_command("tests"), clone, env, timeout=1200)
    summary = tested.strip().splitlines()[-1]
    assert " passed" in summary, summary
    assert "failed" not in summary, summary
    assert "error" not in summary, summary
    # the data-backed tests skipped, saying where the data comes from
    assert "shared data" in tested or "SHARED_DATA_DIR" in tested, summary
    _run(".venv/bin/python -m bench --quick --output bench-quick.json", clone, env, timeout=900)
    assert (clone / "bench-quick.json").is_file()
