"""One rule for where harnessmem may serve without a token: the inspector and the MCP server
agree on every address (the MCP server once refused ``[::1]`` that the inspector took)."""

from __future__ import annotations

import pytest

from harnessmem.errors import ConfigError
from harnessmem.settings.exposure import check_exposure, is_loopback

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
