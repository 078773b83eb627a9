"""harnessmem.encoding: what UTF-8 can hold on write, tolerant decoding on read, safe cuts."""

from __future__ import annotations

import codecs

from hypothesis import given
from hypothesis import strategies as st

from harnessmem.encoding import cut_utf8, decode, encode, storable

_SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)


@given(st.text(st.characters() | _SURROGATES, max_size=60))
def test_encode_never_fails_and_keeps_what_utf8_holds(text: str) -> None:
    data = encode(text)
    assert data.decode("utf-8") == storable(text)
    if storable(text) == text:
        assert data == text.encode("utf-8")


def test_pairs_are_joined_and_lone_surrogates_replaced() -> None:
    assert storable("a\ud83d\ude00b") == "a😀b"
    assert storable("report-\udcff.txt") == "report-\ufffd.txt"
    assert storable("\ude00\ud83d") == "\ufffd\ufffd"  # a pair in the wrong order is no pair


@given(st.text(max_size=60))
def test_clean_utf8_decodes_as_it_is(text: str) -> None:
    assert decode(text.encode()) == (text, None) or text.startswith("\ufeff")


def test_boms_and_bad_bytes() -> None:
    text = "São Paulo\n"
    assert decode(codecs.BOM_UTF16_BE + text.encode("utf-16-be")) == (text, "UTF-16-BE")
    assert decode(text.encode("utf-32")) == (text, "UTF-32-LE")
    assert decode(text.encode("utf-8-sig"))[0] == text
    read, problem = decode(text.encode("latin-1"))
    assert read == "S\ufffdo Paulo\n"
    assert problem is not None
    assert "1 undecodable byte sequence, the first at byte 1" in problem


@given(st.text(max_size=40), st.integers(0, 200))
def test_cuts_never_split_a_character(text: str, at: int) -> None:
    data = text.encode()
    head = cut_utf8(data[:at], at_end=True)
    tail = cut_utf8(data[at:], at_end=False)
    assert text.startswith(head.decode("utf-8"))
    assert text.endswith(tail.decode("utf-8"))
    assert len(data[:at]) - len(head) <= 3
    assert len(data[at:]) - len(tail) <= 3
