"""Text as the workspace stores it: encoded safely on write, decoded tolerantly on read.

Every text harnessmem persists passes through :func:`encode` (the workspace's write
paths and the session log's JSON lines), and every file it reads as text passes through
:func:`decode`; a store or plugin that persists text of its own uses the same functions,
so that what it writes reads back as the workspace's own files do:

- a Python ``str`` may hold lone surrogates (a file name ``os.listdir`` read with
  ``surrogateescape``, a JSON ``"\\ud800"`` escape) that UTF-8 cannot encode. One such
  character must not block the write of everything around it, so surrogate pairs are
  joined into the character they stand for and each lone surrogate becomes U+FFFD; the
  rest of the text is kept as it is.
- a file edited elsewhere may hold bytes that are not UTF-8 (a Latin-1 ``\\xe3``) or be
  UTF-16/32 with a byte-order mark. Such a file is read anyway: the encoding a BOM
  names, else UTF-8 with each bad byte shown as U+FFFD; :func:`decode` says what was
  wrong so the caller can warn and keep the original bytes before replacing them.

:func:`content_hash` is the one hash of stored bytes: the index's incremental sync, the
consolidation watermark and the stores' compare-and-swap versions all use it.
"""

from __future__ import annotations

import codecs
import hashlib
import re

__all__ = ["content_hash", "cut_utf8", "decode", "encode", "storable", "wide_codec"]

#: Code points UTF-8 cannot encode: the surrogates (U+D800-U+DFFF).
_SURROGATE = re.compile("[\ud800-\udfff]")

# Longest first: the UTF-32-LE mark starts with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32-LE"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32-BE"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8 with a byte-order mark"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16-LE"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16-BE"),
)


def content_hash(data: bytes) -> str:
    """The hash of stored bytes (SHA-256 cut to 128 bits, hex).

    SHA-256 rather than blake2b: CPUs with SHA extensions (x86 since ~2017, ARMv8) hash
    it about three times as fast, and an index rebuild hashes every file. An index that
    holds hashes of another function sees each file as changed once and keeps its
    unchanged entries.
    """
    return hashlib.sha256(data).hexdigest()[:32]


def storable(text: str) -> str:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD.

    The identical string when it holds no surrogate (the common case costs one search).
    """
    if _SURROGATE.search(text) is None:
        return text
    # UTF-16 is the one codec that pairs surrogates: through it a high + low surrogate
    # becomes the character they encode, and ``replace`` turns each lone one into U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def encode(text: str) -> bytes:
    """``text`` as UTF-8, unencodable code points replaced (see :func:`storable`)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return storable(text).encode("utf-8")


def decode(data: bytes) -> tuple[str, str | None]:
    """The text of stored bytes and what was wrong with them (None: clean UTF-8).

    Clean UTF-8 decodes as it is. With a byte-order mark the encoding it names is used
    (and the mark dropped); otherwise bytes that are not UTF-8 each become U+FFFD. When
    the second item is not None, ``encode(text)`` differs from ``data``.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        first_bad = exc.start
    else:
        if not text.startswith("\ufeff"):
            return text, None
        return text[1:], "UTF-8 with a byte-order mark"
    for mark, codec, name in _BOMS:
        if data.startswith(mark):
            return data[len(mark) :].decode(codec, "replace"), name
    text = data.decode("utf-8", "replace")
    bad = text.count("\ufffd") - data.count("\ufffd".encode())
    return text, (
        f"not UTF-8 ({bad} undecodable byte sequence{'s' if bad != 1 else ''}, the first at "
        f"byte {first_bad}; shown as U+FFFD)"
    )


def wide_codec(data: bytes) -> tuple[str, int] | None:
    """``(codec, length of the mark)`` when ``data`` starts with a UTF-16/32 byte-order
    mark, else None (UTF-8, with or without its mark)."""
    for mark, codec, _ in _BOMS:
        if data.startswith(mark):
            return None if codec == "utf-8" else (codec, len(mark))
    return None


def cut_utf8(data: bytes, *, at_end: bool) -> bytes:
    """``data`` without a UTF-8 sequence split at its end (``at_end``) or its start.

    For bounded reads that cut a file at an arbitrary byte: the partial character is
    dropped instead of showing as U+FFFD.
    """
    if at_end:
        # Back up over continuation bytes to the lead byte of the last character; keep
        # it only if the character is complete.
        for back in range(1, min(4, len(data)) + 1):
            byte = data[-back]
            if byte & 0xC0 != 0x80:
                need = 1 if byte < 0x80 else 2 if byte >> 5 == 6 else 3 if byte >> 4 == 14 else 4
                return data if need <= back else data[:-back]
        return data
    start = 0
    while start < min(3, len(data)) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:]
