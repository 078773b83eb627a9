"""Cold start of harnessmem against ``import pydantic, pluggy``.

``import harnessmem`` is lazy (PEP 562), so the row that imports the public API
(``MemoryHarness``, ``HarnessSettings``) is the one an application pays.

Each figure is the median wall time of a fresh interpreter, so interpreter
start-up is inside both the measurement and the baseline; the net rows
subtract a bare ``python -c pass`` measured in the same run. The commands take turns
(one sample of each per round), so a burst of load hits them alike.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench._util import Row


def _cold(commands: dict[str, list[str]], repeat: int) -> dict[str, float]:
    """Median wall time of each command in a fresh process; the commands take turns."""
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def _console_script() -> list[str]:
    script = Path(sys.executable).parent / "harnessmem"
    if script.exists():
        return [str(script)]
    found = shutil.which("harnessmem")
    if found:
        return [found]
    return [sys.executable, "-m", "harnessmem.cli"]


def run(quick: bool) -> list[Row]:
    """Rows for the cold imports and ``harnessmem --help``, against ``import pydantic, pluggy``."""
    repeat = 5 if quick else 15
    python = sys.executable
    times = _cold(
        {
            "bare": [python, "-c", "pass"],
            "baseline": [python, "-c", "import pydantic, pluggy"],
            "ours": [python, "-c", "import harnessmem"],
            "api": [python, "-c", "from harnessmem import MemoryHarness, HarnessSettings"],
            "cli": [*_console_script(), "--help"],
        },
        repeat,
    )
    bare, baseline, ours, api, cli = (times[k] for k in ("bare", "baseline", "ours", "api", "cli"))
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
