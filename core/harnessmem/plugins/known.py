"""Backends harnessmem knows of but does not ship, and how to get each.

A name a user configures is looked up among the installed entry points first; only when
nothing installed has it does this table say where it comes from, so that
``index.backend = "postgres"`` without the plugin answers ``pip install
harnessmem-postgres`` instead of a did-you-mean. The table lists only distributions that
exist (tests/test_plugins.py checks each one in ``plugins/`` declares the name it is
listed under); a name that is neither installed nor known keeps the did-you-mean.

Storage is keyed by URL protocol: the stores harnessmem ships need a library that is an
optional extra (``s3://`` needs s3fs, from ``harnessmem[s3]``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "KNOWN_BACKENDS",
    "KNOWN_STORAGE",
    "KnownBackend",
    "KnownStorage",
    "missing_storage",
    "url_protocol",
]


@dataclass(frozen=True)
class KnownBackend:
    """A backend another distribution provides under a name."""

    distribution: str
    about: str

    @property
    def install(self) -> str:
        return f"pip install {self.distribution}"


@dataclass(frozen=True)
class KnownStorage:
    """A workspace protocol whose store needs a library that is an optional extra."""

    module: str
    install: str
    about: str


#: kind (``index`` / ``model``) -> backend name -> where it comes from.
KNOWN_BACKENDS: Mapping[str, Mapping[str, KnownBackend]] = {
    "index": {
        "postgres": KnownBackend(
            "harnessmem-postgres", "PostgreSQL full-text index shared by several replicas"
        ),
    },
    "model": {},
}

_S3 = KnownStorage("s3fs", "pip install 'harnessmem[s3]'", "S3 and S3-compatible object stores")

#: workspace URL protocol -> the library its store needs.
KNOWN_STORAGE: Mapping[str, KnownStorage] = {"s3": _S3, "s3a": _S3}


def url_protocol(url: str) -> str | None:
    """The protocol of a workspace URL (the innermost of a chain, ``simplecache::s3://``);
    None for a plain local path."""
    if "://" not in url and "::" not in url:
        return None
    return url.split("://", 1)[0].rsplit("::", 1)[-1]


def missing_storage(url: str) -> tuple[str, KnownStorage] | None:
    """The protocol of ``url`` and what its store needs, when that is not installed.

    Looks for the library without importing it (s3fs takes a while to import).
    """
    protocol = url_protocol(url)
    known = KNOWN_STORAGE.get(protocol or "")
    if protocol is None or known is None or importlib.util.find_spec(known.module) is not None:
        return None
    return protocol, known
