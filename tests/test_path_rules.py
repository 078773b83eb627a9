"""One statement of which paths name a workspace file (``layout.path_problem``): the
workspace's own check and an archive import's stricter one never disagree."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harnessmem.errors import PathNotAllowed
from harnessmem.layout import path_problem
from harnessmem.workspace import Workspace

REFUSED = {
    "/etc/passwd": "it is absolute",
    "s3://bucket/MEMORY.md": "it is a URL or drive path",
    "C:/x.md": "it is a URL or drive path",
    "memory\\x.md": "it contains a backslash or NUL",
    "memory/x\x00.md": "it contains a backslash or NUL",
    "../out.md": "'..' leaves the workspace",
    "memory/../../out.md": "'..' leaves the workspace",
    ".locks/maintenance.lease": ".locks/ holds the workspace's locks and leases",
    "memory/../.locks/x": ".locks/ holds the workspace's locks and leases",
    "": "it names the workspace root, not a file",
    "./": "it names the workspace root, not a file",
}


@pytest.mark.parametrize(("raw", "why"), REFUSED.items())
def test_refused_paths_give_their_reason_in_both_checks(tmp_path: Path, raw: str, why: str) -> None:
    assert path_problem(raw) == ("", why)
    assert path_problem(raw, normal=True)[1] is not None
    with pytest.raises(PathNotAllowed, match="is not allowed in workspace") as caught:
        Workspace.open(str(tmp_path / "ws")).resolve(raw)
    assert why in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "rel"),
    [("memory/./2026-11-30.md", "memory/2026-11-30.md"), ("a//b.md", "a/b.md"), ("a/../b", "b")],
)
def test_a_workspace_normalises_what_an_archive_refuses(raw: str, rel: str) -> None:
    assert path_problem(raw) == (rel, None)
    assert path_problem(raw, normal=True) == ("", "it has an empty, '.' or '..' part")


def test_the_root_is_allowed_only_when_asked() -> None:
    assert path_problem(".", allow_root=True) == ("", None)


_PART = st.sampled_from(["memory", "MEMORY.md", ".", "..", "", ".locks", "a b", "é", "x:y", "\\"])


@given(st.lists(_PART, min_size=1, max_size=6).map("/".join))
def test_whatever_an_archive_accepts_a_workspace_accepts_unchanged(raw: str) -> None:
    strict, strict_why = path_problem(raw, normal=True)
    loose, loose_why = path_problem(raw)
    if strict_why is None:
        assert (loose, loose_why) == (strict, None) == (raw, None)
    if loose_why is None:
        assert loose
        assert ".." not in loose.split("/")
        assert not loose.startswith("/")
