"""Install harnessmem as its users will: built distributions into a fresh environment.

Run by ``.ci/run`` with the checkout's environment (``.venv/bin/python .ci/wheels.py``).
It builds the sdist and the wheel of the core and of every plugin (``python -m build``),
checks their metadata and that the core wheel carries its package data, installs the
wheels (``harnessmem[s3,mcp,inspect]`` and every plugin) into a new virtual environment,
then, from a folder outside the checkout, runs the README's main job, the MCP server over
stdio (an initialize and a tool list, through the SDK's own client) and the inspector
(a page, then SIGTERM). Exits non-zero, saying which step failed, on any problem.
"""

from __future__ import annotations

import email.parser
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = [
    ROOT,
    *sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file()),
]
#: Files the core wheel must carry besides its modules (read at run time).
PACKAGE_DATA = [
    "harnessmem/py.typed",
    "harnessmem/prompts/flush.md",
    "harnessmem/prompts/consolidation.md",
    "harnessmem/prompts/summary.md",
    "harnessmem/examples/tidewater-week.jsonl",
    "harnessmem/examples/tidewater-week.probes",
    "harnessmem/inspector/templates/overview.html",
    "harnessmem/inspector/static/htmx.min.js",
    "harnessmem/inspector/static/htmx.LICENSE",
    "harnessmem/inspector/static/inspector.css",
]
#: What every distribution's metadata must say.
METADATA = ["Name", "Version", "Summary", "Requires-Python", "License-Expression", "Classifier"]


def step(title: str) -> None:
    print(f"+ {title}", flush=True)


def run(*args: str | Path, cwd: Path | None = None, timeout: float = 900) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        sys.exit(
            f"failed ({done.returncode}): {' '.join(map(str, args))}\n{done.stdout}\n{done.stderr}"
        )
    return done.stdout


def build(dist: Path) -> None:
    step(f"build the sdist and wheel of {len(PROJECTS)} distributions")
    for project in PROJECTS:
        run(sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", dist, project)


def check_metadata(dist: Path) -> None:
    step("check each distribution's metadata, README and license")
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != len(PROJECTS):
        sys.exit(f"{len(wheels)} wheels for {len(PROJECTS)} projects: {wheels}")
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
            meta = email.parser.Parser().parsestr(archive.read(meta_name).decode())
            missing = [key for key in METADATA if not meta.get_all(key)]
            if meta.get("Description-Content-Type") != "text/markdown" or not meta.get_payload():
                missing.append("the README as its description")
            if not any(n.endswith("/LICENSE") and ".dist-info/licenses/" in n for n in names):
                missing.append("the LICENSE file")
            if missing:
                sys.exit(f"{wheel.name}: metadata lacks {', '.join(missing)}")
            if meta["Name"] == "harnessmem":
                absent = [path for path in PACKAGE_DATA if path not in names]
                if absent:
                    sys.exit(f"{wheel.name} lacks its package data: {absent}")
    for sdist in sorted(dist.glob("*.tar.gz")):
        with tarfile.open(sdist) as archive:
            names = archive.getnames()
        if not any(n.endswith("/README.md") for n in names) or not any(
            n.endswith("/LICENSE") for n in names
        ):
            sys.exit(f"{sdist.name} lacks its README.md or LICENSE")


def install(dist: Path, env: Path) -> Path:
    step("install the wheels into a fresh environment: harnessmem[s3,mcp,inspect] and plugins")
    run(sys.executable, "-m", "venv", env)
    core = next(dist.glob("harnessmem-*.whl"))
    plugins = list(dist.glob("harnessmem_*.whl"))
    pip = env / "bin" / "pip"
    run(pip, "install", "-q", f"{core}[s3,mcp,inspect]", *plugins)
    return env / "bin"


def main_job(bin_dir: Path, here: Path) -> None:
    step("the README's main job, from the wheel")
    out = run(bin_dir / "harnessmem", "replay", "--example", "-w", "demo/workspace", cwd=here)
    if "Done in" not in out:
        sys.exit(f"replay --example printed no summary:\n{out}")
    hits = run(
        bin_dir / "harnessmem", "search", "staging database", "-w", "demo/workspace", cwd=here
    )
    if "Our staging database is PostgreSQL 16" not in hits:
        sys.exit(f"search found nothing:\n{hits}")
    listed = run(bin_dir / "harnessmem", "plugins", "--json", cwd=here)
    for name in ("postgres", "vectors", "jsonfile"):
        if f'"{name}"' not in listed:
            sys.exit(f"the installed plugins lack {name}:\n{listed}")


def mcp_stdio(bin_dir: Path, here: Path) -> None:
    step("harnessmem mcp over stdio: initialize and list the tools (the SDK's client)")
    client = textwrap.dedent(
        """
        import anyio
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        async def main():
            server = StdioServerParameters(
                command=%r, args=["mcp", "-w", "demo/workspace"], cwd=%r
            )
            async with stdio_client(server) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    print(sorted(tool.name for tool in tools.tools))

        anyio.run(main)
        """
    ) % (str(bin_dir / "harnessmem"), str(here))
    out = run(bin_dir / "python", "-c", client, cwd=here, timeout=120)
    if "memory_search" not in out:
        sys.exit(f"the MCP server listed no memory_search:\n{out}")


def inspector(bin_dir: Path, here: Path) -> None:
    step("harnessmem inspect: the first page, then SIGTERM")
    server = subprocess.Popen(
        [str(bin_dir / "harnessmem"), "inspect", "-w", "demo/workspace", "--port", "0"],
        cwd=here,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        while line and "http://" not in line:
            line = server.stderr.readline()
        if not line:
            sys.exit("harnessmem inspect printed no URL")
        url = "http://" + line.split("http://", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=60) as answer:
            page = answer.read().decode()
        if "What this agent remembers" not in page:
            sys.exit("the inspector's first page is not there")
        server.terminate()
        _, err = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    if server.returncode != 0 or "stopped (SIGTERM)" not in err:
        sys.exit(f"harnessmem inspect did not stop cleanly ({server.returncode}):\n{err}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="harnessmem-wheels-") as tmp:
        dist, here = Path(tmp) / "dist", Path(tmp) / "run"
        here.mkdir()
        build(dist)
        check_metadata(dist)
        bin_dir = install(dist, Path(tmp) / "venv")
        main_job(bin_dir, here)
        mcp_stdio(bin_dir, here)
        inspector(bin_dir, here)
    print("wheels: built, installed and run", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
