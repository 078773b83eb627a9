"""``HarnessStore``: a LangGraph ``BaseStore`` kept in a harnessmem workspace.

Each item is one JSON file, ``langgraph_store/<namespace>/<key>.json`` (each label and the
key percent-encoded), written through the workspace: a local folder or S3, shared by every
replica that opens the workspace. ``search`` filters by exact values of top-level keys and,
given a ``query``, ranks the items by how many of the query's words their values contain
(no embeddings: ``index`` settings are refused).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

if TYPE_CHECKING:
    from harnessmem import MemoryHarness

__all__ = ["STORE_DIR", "HarnessStore"]

#: The workspace folder of the store.
STORE_DIR = "langgraph_store"
_WORD = re.compile(r"\w+")


def _label(text: str) -> str:
    return quote(text, safe="") or "%00"


class HarnessStore(BaseStore):
    """LangGraph's long-term store on a harnessmem workspace (see the module docstring)."""

    supports_ttl = False

    def __init__(self, harness: MemoryHarness) -> None:
        self.harness = harness
        self.workspace = harness.workspace

    def _path(self, namespace: tuple[str, ...], key: str) -> str:
        return "/".join([STORE_DIR, *map(_label, namespace), f"{_label(key)}.json"])

    def _read(self, path: str) -> Item | None:
        if not self.workspace.exists(path):
            return None
        data = json.loads(self.workspace.read_text(path))
        return Item(
            value=data["value"],
            key=data["key"],
            namespace=tuple(data["namespace"]),
            created_at=datetime.fromisoformat(data["created_at"]),
            updated_at=datetime.fromisoformat(data["updated_at"]),
        )

    def _items(self, prefix: tuple[str, ...]) -> list[Item]:
        folder = "/".join([STORE_DIR, *map(_label, prefix)])
        paths = [p for p in self.workspace.list(folder) if p.endswith(".json")]
        return [item for item in map(self._read, sorted(paths)) if item is not None]

    def _put(self, op: PutOp) -> None:
        if op.index not in (None, False):
            raise NotImplementedError("HarnessStore: no vector index; put(..., index=False)")
        path = self._path(op.namespace, op.key)
        if op.value is None:
            self.workspace.delete(path, missing_ok=True)
            return
        now = datetime.now(UTC).isoformat()
        old = self._read(path)
        record = {
            "namespace": list(op.namespace),
            "key": op.key,
            "value": dict(op.value),
            "created_at": old.created_at.isoformat() if old else now,
            "updated_at": now,
        }
        self.workspace.write_text(path, json.dumps(record, ensure_ascii=False, indent=1))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        found = [
            item
            for item in self._items(op.namespace_prefix)
            if all(item.value.get(k) == v for k, v in (op.filter or {}).items())
        ]
        scored: list[tuple[float | None, Item]] = [(None, item) for item in found]
        if op.query:
            words = {w.lower() for w in _WORD.findall(op.query)}

            def score(item: Item) -> float:
                text = {w.lower() for w in _WORD.findall(json.dumps(item.value))}
                return len(words & text) / max(len(words), 1)

            scored = sorted(((score(i), i) for i in found), key=lambda pair: -(pair[0] or 0))
            scored = [(s, i) for s, i in scored if s]
        page = scored[op.offset : op.offset + op.limit]
        return [
            SearchItem(i.namespace, i.key, i.value, i.created_at, i.updated_at, s) for s, i in page
        ]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        for path in self.workspace.list(STORE_DIR):
            labels = tuple(unquote(p) for p in path.split("/")[1:-1])
            if op.max_depth is not None:
                labels = labels[: op.max_depth]
            if all(_matches(labels, c.match_type, c.path) for c in op.match_conditions or ()):
                found.add(labels)
        return sorted(found)[op.offset : op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._read(self._path(op.namespace, op.key)))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                raise TypeError(f"HarnessStore: unknown operation {op!r}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))


def _matches(labels: tuple[str, ...], kind: str, path: tuple[str, ...]) -> bool:
    part = labels[: len(path)] if kind == "prefix" else labels[len(labels) - len(path) :]
    return len(labels) >= len(path) and all(p in ("*", a) for p, a in zip(path, part, strict=True))
