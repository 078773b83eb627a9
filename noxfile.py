"""Developer sessions. The default sessions run offline."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests", "plugins", "lint", "typecheck", "imports", "docs"]

PYTHON = "3.11"
PLUGIN_DIRS = sorted(str(p) for p in __import__("pathlib").Path("plugins").glob("*/pyproject.toml"))


def _install(session: nox.Session) -> None:
    session.install("-e", ".[dev]")
    for pyproject in PLUGIN_DIRS:
        session.install("-e", pyproject.rsplit("/", 1)[0])


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the core test suite."""
    _install(session)
    session.run("pytest", "tests", *session.posargs)


@nox.session(python=PYTHON)
def plugins(session: nox.Session) -> None:
    """Run the tests of every distribution under plugins/."""
    _install(session)
    session.run("pytest", "plugins", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Check formatting and lint rules with ruff."""
    session.install("ruff")
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Type-check the core package with mypy --strict."""
    _install(session)
    session.run("mypy")


@nox.session(python=PYTHON)
def imports(session: nox.Session) -> None:
    """Check the layers of [tool.importlinter] (faces > harness > components > stores)."""
    _install(session)
    session.run("lint-imports", "--no-cache")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Check that docs/ covers every hook and setting (the doc meta-tests)."""
    _install(session)
    session.run("pytest", "tests/test_docs.py", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run the benchmarks (pass --quick for a short smoke run) and write bench/results.json."""
    _install(session)
    session.run("python", "-m", "bench", *session.posargs)
