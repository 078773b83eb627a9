"""The path tests of the workspace suite: paths that leave the workspace are refused (by
name, by URL, through a symlink), ordinary ones resolve, and ``safe_id`` stays safe."""

from __future__ import annotations

from typing import ClassVar

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from harnessmem.errors import PathNotAllowed
from harnessmem.testing._workspace_base import FUZZ, SHARED_PROPERTY, WorkspaceSuiteBase
from harnessmem.workspace import Workspace, safe_id

__all__ = ["WorkspacePathTests"]

_SAFE_SEGMENT = st.text(alphabet="abcxyz019_-.", min_size=1, max_size=8).filter(
    lambda s: s.strip(".") != ""
)
_NASTY_SEGMENT = st.sampled_from(
    ["..", ".", "", "a", "b.md", "..\\x", "C:", "s3:", "file:", "\x00", "~", " ", ".locks"]
)
_NASTY_PREFIX = st.sampled_from(["", "/", "//", "s3://", "file:///", "memory://", "C:/", "\\"])


def _is_safe(text: str) -> bool:
    return all(c.isascii() and (c.isalnum() or c in "._-") for c in text)


class WorkspacePathTests(WorkspaceSuiteBase):
    """Confinement of every path to the workspace root."""

    __harnessmem_suite__: ClassVar[bool] = True

    def test_rejects_paths_that_leave(self, workspace: Workspace) -> None:
        """Escaping, absolute, URL, backslash, NUL and lock paths raise PathNotAllowed.

        If this fails: Workspace path normalisation lets one of these through.
        """
        for bad in (
            "../x.md",
            "memory/../../x.md",
            "/etc/passwd",
            "s3://other-bucket/x",
            "file:///etc/passwd",
            "memory://x",
            "C:/Windows",
            "a\\..\\..\\b",
            "a\x00b",
            ".locks/maintenance.lease",
            "",
        ):
            with pytest.raises(PathNotAllowed) as info:
                workspace.write_text(bad, "x")
            assert repr(bad) in str(info.value)
            assert workspace.url in str(info.value)
        assert workspace.list() == []
        assert workspace.resolve("memory/../MEMORY.md") == workspace.resolve("MEMORY.md")

    @FUZZ
    @given(prefix=_NASTY_PREFIX, segments=st.lists(_NASTY_SEGMENT, max_size=6))
    def test_resolve_never_leaves_root(
        self, workspace: Workspace, prefix: str, segments: list[str]
    ) -> None:
        """Any path built from '..', schemes, absolute prefixes etc. resolves inside or fails.

        If this fails: the example hypothesis prints resolved outside the workspace root,
        or a path that climbs above the root was accepted.
        """
        path = prefix + "/".join(segments)
        depth, climbs = 0, False
        for segment in path.split("/"):
            if segment == "..":
                depth -= 1
                climbs = climbs or depth < 0
            elif segment not in ("", "."):
                depth += 1
        try:
            full = workspace.resolve(path)
        except PathNotAllowed:
            return
        assert full.startswith(workspace.resolve("x")[: -len("x")])
        assert not climbs, "a path that climbs above the root was accepted"
        assert not prefix, "an absolute path or URL was accepted"
        assert "\x00" not in path
        assert "\\" not in path

    @FUZZ
    @given(segments=st.lists(_SAFE_SEGMENT, min_size=1, max_size=5))
    def test_valid_relative_paths_resolve(self, workspace: Workspace, segments: list[str]) -> None:
        """Plain relative paths resolve to root + the same path.

        If this fails: normalisation rejects or rewrites an ordinary path.
        """
        assume(segments[0] != ".locks")
        path = "/".join(segments)
        full = workspace.resolve(path).replace("\\", "/")
        assert full == f"{workspace.root.replace(chr(92), '/')}/{path}"

    def test_symlinks_out_of_the_workspace_are_refused(
        self, workspace: Workspace, tmp_path_factory: pytest.TempPathFactory
    ) -> None:
        """A symlink inside the workspace that points outside cannot be read or written.

        If this fails: resolve() does not check the real path of local files.
        """
        if workspace.local_root is None:
            pytest.skip("symlinks exist only in local workspaces")
        outside = tmp_path_factory.mktemp("outside")
        (outside / "secret.txt").write_text("secret")
        try:
            (workspace.local_root / "link").symlink_to(outside, target_is_directory=True)
            (workspace.local_root / "inner").symlink_to(workspace.local_root / "real")
            (workspace.local_root / "leaf.md").symlink_to(outside / "secret.txt")
            (workspace.local_root / "real").mkdir()
            (workspace.local_root / "real" / "hop").symlink_to(workspace.local_root / "link")
        except OSError as exc:  # e.g. Windows without the privilege
            pytest.skip(f"cannot create symlinks here: {exc}")
        with pytest.raises(PathNotAllowed, match="symlink"):
            workspace.read_text("link/secret.txt")
        with pytest.raises(PathNotAllowed, match="symlink"):
            workspace.read_text("leaf.md")  # the last part is the link
        with pytest.raises(PathNotAllowed, match="symlink"):
            workspace.read_text("inner/hop/secret.txt")  # in, then out through a second link
        with pytest.raises(PathNotAllowed):
            workspace.write_text("link/new.txt", "x")
        assert not (outside / "new.txt").exists()
        workspace.write_text("real/ok.md", "ok")
        assert workspace.read_text("inner/ok.md") == "ok"
        assert "link/secret.txt" not in workspace.list()

    @settings(max_examples=200, deadline=None, suppress_health_check=SHARED_PROPERTY)
    @given(st.text(max_size=200), st.text(max_size=200))
    def test_safe_id_properties(self, a: str, b: str) -> None:
        """safe_id: safe charset, bounded, never '.'/'..', idempotent, distinct stays distinct.

        If this fails: the hash suffix is missing for a changed id or the cleaning is wrong.
        """
        for text in (a, b):
            out = safe_id(text)
            assert out not in ("", ".", "..")
            assert len(out) <= 80
            assert _is_safe(out)
            assert safe_id(out) == out
        if a != b:
            assert safe_id(a) != safe_id(b)
        if a.strip(".") and len(a) <= 80 and _is_safe(a):
            assert safe_id(a) == a, "an already safe id was changed"
