"""Cold start of harnessmem against ``import pydantic, pluggy``.

``import harnessmem`` is lazy (PEP 562), so the row that imports the public API
(``MemoryHarness``, ``HarnessSettings``) is the one an application pays.

Each figure is the median wall time of a fresh interpreter, so interpreter
start-up is inside both the measurement and the baseline; the net rows
subtract a bare ``python -c pass`` measured in the same run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench._util import Row


def _cold(argv: list[str], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    samples.sort()
    return samples[len(samples) // 2]


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / "harnessmem"
    if script.exists():
        return [str(script)]
    found = shutil.which("harnessmem")
    if found:
        return [found]
    return [sys.executable, "-m", "harnessmem.cli"]


def run(quick: bool) -> list[Row]:
    repeat = 5 if quick else 15
    python = sys.executable
    bare = _cold([python, "-c", "pass"], repeat)
    baseline = _cold([python, "-c", "import pydantic, pluggy"], repeat)
    ours = _cold([python, "-c", "import harnessmem"], repeat)
    api = _cold([python, "-c", "from harnessmem import MemoryHarness, HarnessSettings"], repeat)
    cli = _cold([*_console_script(), "--help"], repeat)
    base_name = "import pydantic, pluggy"
    return [
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
    ]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
