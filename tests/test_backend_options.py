"""A backend's options: a misspelt key names the dotted setting, a close name and the options."""

from __future__ import annotations

import pytest

from harnessmem.backends.sqlite import SQLiteIndex
from harnessmem.errors import ConfigError


def test_a_misspelt_option_gets_a_suggestion_and_the_valid_names() -> None:
    with pytest.raises(ConfigError) as info:
        SQLiteIndex.parse_options({"busy_timeot": 3}, where="index.options")
    assert "index.options.busy_timeot: unknown setting" in info.value.message
    assert "did you mean 'index.options.busy_timeout'?" in info.value.message
    assert info.value.hint is not None
    assert "busy_timeout" in info.value.hint
