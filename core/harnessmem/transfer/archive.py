"""Import of an archive :func:`~harnessmem.transfer.export_workspace` wrote: checked as a
stream against the ``transfer`` limits and the manifest, then written file by file."""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import tarfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from harnessmem.errors import ArchiveError
from harnessmem.layout import path_problem
from harnessmem.settings.sections import TransferSettings
from harnessmem.transfer.export import FORMAT, MANIFEST, PREFIX, VERSION
from harnessmem.transfer.plan import (
    ImportResult,
    folders_of,
    plan_writes,
    sha256_of,
    write_order,
)

if TYPE_CHECKING:
    from harnessmem.harness import MemoryHarness

__all__ = [
    "MANIFEST_LIMIT",
    "RATIO_FLOOR",
    "Archive",
    "ArchivedFile",
    "import_archive",
    "read_archive",
]

#: Bytes read from an archive member at a time while its checksum is computed.
_CHUNK = 1024 * 1024

#: The ratio limit applies from this many unpacked bytes on: a small archive is mostly tar
#: headers and padding, which pack tighter than any memory.
RATIO_FLOOR = 16 * 1024 * 1024

#: The largest manifest read: it lists each file in about 130 bytes, so this is about
#: 120,000 files, and parsed it takes about four times as much memory.
MANIFEST_LIMIT = 16 * 1024 * 1024


@dataclass(frozen=True)
class ArchivedFile:
    """One file of a checked archive: its workspace path, size and SHA-256 (hex), and
    where its bytes start in the archive's (unpacked) tar stream."""

    path: str
    size: int
    sha256: str
    offset: int = field(repr=False)


@dataclass(frozen=True)
class Archive:
    """A checked archive: where it is and its files by workspace path.

    It holds no file's bytes: :func:`import_archive` reads each from the archive when it
    writes it, and checks its SHA-256 again.
    """

    source: str
    files: Mapping[str, ArchivedFile]


def read_archive(
    archive: str | os.PathLike[str], *, limits: TransferSettings | None = None
) -> Archive:
    """Check an archive :func:`export_workspace` wrote; ArchiveError if amiss.

    Streamed, never held whole, in two passes over the archive. The first reads the
    headers and the manifest (the last member), refusing a member whose header would take
    the unpacked stream past ``limits`` (the ``transfer`` settings: the total, and the
    ratio to the archive's size) before its bytes are read. The second compares each
    member with its manifest entry, its size before its bytes are read, then its SHA-256
    a megabyte at a time. So a tar bomb is refused having read a header, not a gigabyte,
    and what the check holds grows with the manifest only.
    """
    path = Path(archive)
    where = str(path)
    if not path.is_file():
        raise ArchiveError(
            f"{where} is not a file", hint="pass the archive harnessmem export wrote"
        )
    limits = limits or TransferSettings()
    packed = path.stat().st_size
    try:
        with tarfile.open(path, mode="r:*") as tar:
            manifest = _scan(tar, where, limits, packed)
        with tarfile.open(path, mode="r:*") as tar:
            files = _match(tar, manifest, where, limits, packed)
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        if isinstance(exc, ArchiveError):
            raise
        why = "not a tar file, plain or compressed" if isinstance(exc, tarfile.ReadError) else exc
        raise ArchiveError(f"{where} is not a readable archive: {why}") from None
    return Archive(where, files)


def _members(
    tar: tarfile.TarFile, where: str, limits: TransferSettings, packed: int
) -> Iterator[tarfile.TarInfo]:
    """The members of ``tar`` one by one, each refused from its header when its bytes
    would take the unpacked stream past the limits. tarfile's own list of the headers read
    so far is emptied as it goes: 180,000 empty members pack into 1 MB."""
    by_ratio = max(limits.max_import_ratio * packed, RATIO_FLOOR)
    while (member := tar.next()) is not None:
        end = member.offset_data + member.size
        if end > limits.max_import_bytes or end > by_ratio:
            raise _too_large(where, member.name, end, packed, limits)
        kept = getattr(tar, "members", None)  # TarFile.members: undocumented
        if isinstance(kept, list):
            kept.clear()
        yield member


def _scan(
    tar: tarfile.TarFile, where: str, limits: TransferSettings, packed: int
) -> dict[str, tuple[int, str]]:
    """The manifest's files (path -> size and SHA-256), reading no other member's bytes."""
    manifest: dict[str, tuple[int, str]] | None = None
    for member in _members(tar, where, limits, packed):
        if member.name == MANIFEST:
            if manifest is not None:
                raise ArchiveError(f"{where}: it holds {MANIFEST} twice (a crafted archive)")
            manifest = _manifest(tar, member, where)
    if manifest is None:
        raise ArchiveError(
            f"{where} is not a harnessmem export: it has no {MANIFEST}",
            hint="harnessmem export -w WORKSPACE FILE writes one; a Java harness "
            "workspace is imported with --from java",
        )
    return manifest


def _match(
    tar: tarfile.TarFile,
    manifest: Mapping[str, tuple[int, str]],
    where: str,
    limits: TransferSettings,
    packed: int,
) -> dict[str, ArchivedFile]:
    """Each file of the manifest, found in ``tar`` as a plain member of the size the
    manifest says (checked before its bytes are read) and the same SHA-256; nothing else
    under ``workspace/``."""
    files: dict[str, ArchivedFile] = {}
    for member in _members(tar, where, limits, packed):
        if not member.name.startswith(PREFIX):
            continue
        rel = member.name[len(PREFIX) :]
        if rel not in manifest:
            raise ArchiveError(f"{where}: files outside its manifest: {rel}")
        if rel in files:
            raise ArchiveError(f"{where}: it holds {rel!r} twice (a crafted archive)")
        size, sha256 = manifest[rel]
        if not member.isfile() or member.issparse():
            raise ArchiveError(f"{where}: {rel!r} is not a plain file (a crafted archive)")
        entry = ArchivedFile(rel, size, sha256, member.offset_data)
        if member.size != size or _digest(tar, entry) != sha256:
            raise ArchiveError(
                f"{where}: {rel!r} does not match its manifest entry (damaged archive)"
            )
        files[rel] = entry
    missing = sorted(set(manifest) - set(files))
    if missing:
        raise ArchiveError(f"{where}: the manifest lists {missing[0]!r}, the archive lacks it")
    return files


def _too_large(
    where: str, name: str, end: int, packed: int, limits: TransferSettings
) -> ArchiveError:
    if end > limits.max_import_bytes:
        what = f"over transfer.max_import_bytes ({_size(limits.max_import_bytes)})"
    else:
        what = (
            f"over transfer.max_import_ratio ({limits.max_import_ratio:g}) times its size "
            f"({_size(packed)})"
        )
    return ArchiveError(
        f"{where}: unpacked it would be {what}: {name!r} ends at {_size(end)}; "
        "nothing was imported",
        hint="an archive you trust may need the limit raised "
        "(HARNESSMEM_TRANSFER__MAX_IMPORT_BYTES, HARNESSMEM_TRANSFER__MAX_IMPORT_RATIO)",
    )


def _size(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if count < 1024:
            return f"{count:,.0f} {unit}" if unit == "bytes" else f"{count:,.1f} {unit}"
        count /= 1024
    return f"{count:,.1f} GiB"


def _file_and_folder(paths: Iterable[str]) -> tuple[str, str] | None:
    """A path that is a file and also the folder of another path, with that one; or None."""
    listed = set(paths)
    for rel in sorted(listed):
        for cut in folders_of(rel):
            if cut in listed:
                return cut, rel
    return None


def _open_member(tar: tarfile.TarFile, entry: ArchivedFile) -> IO[bytes]:
    """A reader of ``entry``'s bytes in ``tar``, from what the check kept of its header."""
    info = tarfile.TarInfo(PREFIX + entry.path)
    info.size, info.offset_data = entry.size, entry.offset
    extracted = tar.extractfile(info)
    assert extracted is not None  # a plain file's TarInfo (REGTYPE, the default)
    return extracted


def _digest(tar: tarfile.TarFile, entry: ArchivedFile) -> str:
    """The SHA-256 of a member's bytes, read a chunk at a time."""
    digest = hashlib.sha256()
    with _open_member(tar, entry) as extracted:
        while chunk := extracted.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _manifest(
    tar: tarfile.TarFile, member: tarfile.TarInfo, where: str
) -> dict[str, tuple[int, str]]:
    """The manifest's files (path -> size and SHA-256), every path one a workspace allows."""
    if member.size > MANIFEST_LIMIT:
        raise ArchiveError(
            f"{where}: {MANIFEST} is {_size(member.size)}, over the {_size(MANIFEST_LIMIT)} "
            "a manifest may have"
        )
    extracted = tar.extractfile(member)
    try:
        data = json.loads(extracted.read() if extracted is not None else b"")
    except (ValueError, UnicodeDecodeError):
        raise ArchiveError(f"{where}: {MANIFEST} is not JSON") from None
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise ArchiveError(f"{where}: {MANIFEST} is not a harnessmem export manifest")
    if data.get("version") != VERSION:
        raise ArchiveError(
            f"{where}: export format version {data.get('version')!r}; this harnessmem reads "
            f"version {VERSION}",
            hint="import it with the harnessmem version that exported it, or a newer one",
        )
    files = data.get("files")
    ok = isinstance(files, list) and all(
        isinstance(f, Mapping)
        and isinstance(f.get("path"), str)
        and type(f.get("size")) is int
        and f["size"] >= 0
        and isinstance(f.get("sha256"), str)
        for f in files
    )
    if not ok:
        raise ArchiveError(f"{where}: {MANIFEST} has no valid 'files' list")
    assert isinstance(files, list)  # checked above
    listed: dict[str, tuple[int, str]] = {}
    for entry in files:
        rel = entry["path"]
        _, problem = path_problem(rel, normal=True)
        if problem:
            raise ArchiveError(
                f"{where}: path {rel!r} is not allowed in a workspace: {problem}; "
                "nothing was imported"
            )
        if rel in listed:
            raise ArchiveError(f"{where}: the manifest lists {rel!r} twice (a crafted archive)")
        listed[rel] = (entry["size"], entry["sha256"])
    clash = _file_and_folder(listed)
    if clash:
        raise ArchiveError(
            f"{where}: {clash[0]!r} is a file, and the archive also puts {clash[1]!r} under "
            "it (a crafted archive); nothing was imported"
        )
    return listed


def import_archive(
    harness: MemoryHarness, archive: Archive | str | os.PathLike[str]
) -> ImportResult:
    """Import an archive :func:`export_workspace` wrote into the harness's workspace.

    Pass what :func:`read_archive` returned to check the archive before opening (and so
    creating) the workspace; a path is checked here, with the harness's ``transfer``
    settings. Each file's bytes are read from the archive as it is written (one file in
    memory at a time) and checked against the manifest's SHA-256 once more."""
    checked = (
        archive
        if isinstance(archive, Archive)
        else read_archive(archive, limits=harness.settings.transfer)
    )
    digests = {rel: entry.sha256 for rel, entry in checked.files.items()}
    write, same = plan_writes(harness.workspace, digests, checked.source)
    if write:
        with (
            harness.kernel.audit.change("import") as change,
            tarfile.open(checked.source, mode="r:*") as tar,
        ):
            for rel in write_order(write):
                harness.workspace.write_bytes(rel, _read_member(tar, checked, rel))
            change.count("files", len(write))
            harness.reindex()
    return ImportResult(checked.source, written=sorted(write), unchanged=sorted(same))


def _read_member(tar: tarfile.TarFile, archive: Archive, rel: str) -> bytes:
    with _open_member(tar, archive.files[rel]) as extracted:
        data = extracted.read()
    if sha256_of(data) != archive.files[rel].sha256:
        raise ArchiveError(
            f"{archive.source}: {rel!r} changed since the archive was checked",
            hint="import it again once nothing writes to the archive",
        )
    return data
