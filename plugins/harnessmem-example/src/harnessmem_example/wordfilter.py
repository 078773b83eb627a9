"""Replace configured words in every text harnessmem is about to persist.

Configure it in harnessmem.toml::

    [plugins.settings.wordfilter]
    words = ["Project Nightingale", "acme-internal"]
    replacement = "[filtered]"
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from harnessmem import hookimpl
from harnessmem.plugins import plugin_options

if TYPE_CHECKING:
    from harnessmem import HarnessSettings

PLUGIN_NAME = "wordfilter"


class WordFilterOptions(BaseModel):
    """Options of the word filter (``plugins.settings.wordfilter``)."""

    model_config = ConfigDict(extra="forbid")

    words: list[str] = Field(default_factory=list, description="Words or phrases to replace.")
    replacement: str = Field("[filtered]", description="Text put in place of each match.")
    case_sensitive: bool = Field(False, description="Match case exactly.")


class WordFilter:
    """A ``transform_memory_text`` plugin; one instance per harness (entry points build it)."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.options = WordFilterOptions()
        self._pattern: re.Pattern[str] | None = None

    @hookimpl
    def harnessmem_configure(self, settings: HarnessSettings) -> None:
        # Raises ConfigError naming plugins.settings.wordfilter.<key>, with a did-you-mean.
        self.options = plugin_options(settings, PLUGIN_NAME, WordFilterOptions)
        words = sorted((w for w in self.options.words if w.strip()), key=len, reverse=True)
        if not words:
            self._pattern = None
            return
        flags = 0 if self.options.case_sensitive else re.IGNORECASE
        alternatives = "|".join(re.escape(w) for w in words)
        self._pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", flags)

    @hookimpl
    def transform_memory_text(self, text: str) -> str | None:
        if self._pattern is None:
            return None
        return self._pattern.sub(self.options.replacement, text)
