"""The installed entry points of harnessmem's four groups, found without importing them.

- ``harnessmem.plugins``: hook plugins (a module, a class instantiated with no arguments,
  or an object);
- ``harnessmem.index`` and ``harnessmem.model``: backend classes, imported only when the
  configuration picks their name;
- ``harnessmem.storage``: workspace stores by protocol, imported only when a workspace URL
  has that protocol (see :mod:`harnessmem.workspace.store`).

The only state of the plugin system that outlives a harness is the cache here, kept until
a folder on ``sys.path`` changes (:func:`refresh_entry_points` drops it at once).
"""

from __future__ import annotations

import os
import sys
import time
from importlib import metadata

PLUGIN_GROUP = "harnessmem.plugins"
INDEX_GROUP = "harnessmem.index"
MODEL_GROUP = "harnessmem.model"
STORAGE_GROUP = "harnessmem.storage"
GROUPS = (PLUGIN_GROUP, INDEX_GROUP, MODEL_GROUP, STORAGE_GROUP)
CORE_DISTRIBUTION = "harnessmem"

#: Entry points by group, for one state of the folders on ``sys.path`` (see _path_stamp).
_ENTRY_POINTS: dict[tuple[tuple[str, int], ...], dict[str, list[metadata.EntryPoint]]] = {}
#: A folder modified closer to now than this may change again within its timestamp's tick.
_SETTLED_NS = 2_000_000_000


def _path_stamp() -> tuple[tuple[str, int], ...] | None:
    """The modification times of the ``sys.path`` folders; None if one changed just now.

    Installing or removing a distribution changes the folder that holds its metadata,
    so the stamp changes with what ``importlib.metadata`` would find. A folder modified
    within ``_SETTLED_NS`` may be modified again without its time moving (timestamps
    tick every few milliseconds): then nothing is cached.
    """
    stamp = []
    now = time.time_ns()
    for folder in sys.path:
        try:
            mtime = os.stat(folder or ".").st_mtime_ns
        except OSError:
            mtime = -1
        if now - mtime < _SETTLED_NS:
            return None
        stamp.append((folder, mtime))
    return tuple(stamp)


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The installed entry points of ``group`` by name.

    Scanning every distribution's metadata costs milliseconds (~4-12 ms with a hundred
    packages installed) whether one group or all are wanted, and a harness that opens looks
    up three or four groups: one scan finds every group's, kept per process until a folder
    on ``sys.path`` changes.
    """
    stamp = _path_stamp()
    groups = _ENTRY_POINTS.get(stamp) if stamp is not None else None
    if groups is None or group not in groups:
        # entry_points() reads every distribution's entry points, whichever are selected.
        every = metadata.entry_points()
        groups = {
            name: sorted(every.select(group=name), key=lambda ep: ep.name)
            for name in (*GROUPS, group)
        }
        if stamp is not None:
            if len(_ENTRY_POINTS) > 4:  # sys.path changed; old stamps will not come back
                _ENTRY_POINTS.clear()
            _ENTRY_POINTS[stamp] = groups
    return list(groups[group])


def distribution_of(entry_point: metadata.EntryPoint) -> tuple[str, str]:
    """The name and version of the distribution that provides ``entry_point``."""
    dist = entry_point.dist
    if dist is None:
        return "?", "?"
    return dist.metadata["Name"] or dist.name, dist.version


def refresh_entry_points() -> None:
    """Forget the entry points found so far: the next lookup scans the metadata again (a
    test that installs a distribution in-process, or a long-lived process after ``pip``)."""
    _ENTRY_POINTS.clear()
