"""harnessmem: lasting memory for LLM agents with a bounded context window."""
