"""Shared fixtures of the core test suite."""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# -- fake installed distributions (real importlib.metadata discovery) ----------------------------


@dataclass
class FakeDistributions:
    """Writes importable modules and ``*.dist-info`` folders to a directory on ``sys.path``."""

    root: Path

    def add(
        self,
        name: str,
        entry_points: dict[str, dict[str, str]],
        modules: dict[str, str] | None = None,
        version: str = "0.1.0",
    ) -> None:
        for module, source in (modules or {}).items():
            (self.root / f"{module}.py").write_text(textwrap.dedent(source))
        info = self.root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        lines = []
        for group, items in entry_points.items():
            lines.append(f"[{group}]")
            lines.extend(f"{key} = {value}" for key, value in items.items())
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        importlib.invalidate_caches()


@pytest.fixture
def fake_distributions(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeDistributions]:
    """Install throwaway distributions (entry points + modules) for this test only."""
    root = tmp_path_factory.mktemp("site")
    monkeypatch.syspath_prepend(str(root))
    before = set(sys.modules)
    yield FakeDistributions(root)
    for module in set(sys.modules) - before:
        if getattr(sys.modules[module], "__file__", "") and str(root) in str(
            sys.modules[module].__file__
        ):
            del sys.modules[module]
    importlib.invalidate_caches()


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No HARNESSMEM_* variable or ./harnessmem.toml of the developer leaks into a test."""
    for key in list(os.environ):
        if key.startswith("HARNESSMEM_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
