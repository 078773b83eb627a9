"""One rule for where harnessmem may serve without a token: the inspector and the MCP server
agree on every address (the MCP server once refused ``[::1]`` that the inspector took)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harnessmem.errors import ConfigError
from harnessmem.settings.exposure import (
    check_exposure,
    is_loopback,
    local_origin,
    loopback_names,
    same_secret,
)

LOOPBACK = ["localhost", "127.0.0.1", "127.8.9.10", "::1", "[::1]", "0:0:0:0:0:0:0:1"]
EXPOSED = ["0.0.0.0", "::", "[::]", "192.168.1.4", "10.0.0.1", "example.com", "localhost.evil", ""]


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", EXPOSED)
def test_other_addresses_and_host_names_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize("host", LOOPBACK + EXPOSED)
def test_the_inspector_and_the_mcp_server_apply_the_same_rule(host: str) -> None:
    pytest.importorskip("mcp", reason="the MCP SDK (harnessmem[mcp]) is not installed")
    from harnessmem.inspector import check_exposure as inspector_check
    from harnessmem.mcp import check_exposure as mcp_check

    refused = []
    for check in (inspector_check, mcp_check):
        try:
            check(host, None)
        except ConfigError as exc:
            refused.append(str(exc))
        check(host, "a-token")  # a token always allows it
    assert len(refused) == (0 if is_loopback(host) else 2)


def test_the_refusal_says_what_and_how() -> None:
    with pytest.raises(ConfigError, match=r"on 0\.0\.0\.0") as caught:
        check_exposure("0.0.0.0", None, refusal="serving on 0.0.0.0", hint="bind to 127.0.0.1")
    assert caught.value.hint == "bind to 127.0.0.1"
    check_exposure("[::1]", None, refusal="unused", hint="unused")


@pytest.mark.parametrize(
    ("host", "names"),
    [
        ("127.0.0.1", ("127.0.0.1", "localhost")),
        ("127.0.0.2", ("127.0.0.2",)),
        ("127.0.1.1", ("127.0.1.1",)),
        ("localhost", ("localhost", "127.0.0.1", "[::1]")),
        ("::1", ("[::1]", "localhost")),
        ("[::1]", ("[::1]", "localhost")),
        ("0:0:0:0:0:0:0:1", ("[::1]", "[0:0:0:0:0:0:0:1]", "localhost")),
        ("0.0.0.0", ()),
        ("example.com", ()),
    ],
)
def test_a_loopback_bind_answers_the_names_it_was_bound_with(
    host: str, names: tuple[str, ...]
) -> None:
    """Issue 37 point 2: each loopback address is its own name; localhost goes with the
    addresses it resolves to; a host name is never one (its DNS answer may change)."""
    assert loopback_names(host) == names


@pytest.mark.parametrize(
    ("origin", "local"),
    [
        ("http://127.0.0.2:8766", True),
        ("http://127.0.0.2", True),
        ("HTTP://127.0.0.2:1", True),
        ("https://127.0.0.2:8766", False),
        ("http://127.0.0.2.attacker.example", False),
        ("http://127.0.0.2:8766@attacker.example", False),
        ("http://attacker.example:8766", False),
        ("http://127.0.0.20:8766", False),
        ("null", False),
        ("", False),
        ("http://[::1]:8766", False),
    ],
)
def test_an_origin_is_local_only_when_it_is_one_of_the_names(origin: str, local: bool) -> None:
    assert local_origin(origin, loopback_names("127.0.0.2")) is local


def test_an_ipv6_origin_keeps_its_brackets() -> None:
    assert local_origin("http://[::1]:8766", loopback_names("::1"))
    assert not local_origin("http://[::2]:8766", loopback_names("::1"))


@given(st.text(), st.text(min_size=1))
def test_a_secret_compares_with_any_text(given_text: str, secret: str) -> None:
    """Issue 37 point 6: ``hmac.compare_digest`` raises on str beyond ASCII; the check
    compares any text (lone surrogates too) and says yes only for the secret itself."""
    assert same_secret(given_text, secret) is (given_text == secret)
    assert same_secret(secret, secret)
