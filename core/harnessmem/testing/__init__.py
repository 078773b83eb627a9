"""Test helpers shipped for harnessmem's own tests and for plugin authors.

- ``ScriptedModel``: a deterministic model backend that records its calls;
- ``FakeOpenAIServer`` and ``Fault``: a loopback OpenAI-compatible server with scripted
  replies and injected faults;
- the conformance suites (``WorkspaceSuite``, ...), their base ``ConformanceSuite`` and
  ``suite_override`` for a deliberate replacement of a suite test;
- ``FakeClock``: an injectable clock for tests that never sleep;
- ``S3TestServer`` and ``S3Fault``: moto's S3 on loopback, one request at a time, with a
  request log and injected faults (needs ``moto[server]``);
- ``EventLog`` and ``loopback_only``: an observer-event recorder and a network guard
  (:mod:`harnessmem.testing.recorders`);
- ``run_at_once``: several calls started together in threads, to race them.

The test doubles import only the standard library and harnessmem; the suites import pytest
and hypothesis, so they load on first use (``from harnessmem.testing import WorkspaceSuite``).
"""

from __future__ import annotations

from typing import Any

from harnessmem.testing._suite import ConformanceSuite, suite_integrity_problems, suite_override
from harnessmem.testing.openai_server import FakeOpenAIServer, Fault, RecordedRequest
from harnessmem.testing.scripted import ModelCall, ScriptedModel
from harnessmem.testing.threads import run_at_once

_SUITES = {
    "FakeClock": "clock",
    "WorkspaceSuite": "workspace_suite",
    "IndexBackendSuite": "index_suite",
    "ModelBackendSuite": "model_suite",
    "ModelFault": "model_suite",
    "S3Fault": "s3_server",
    "S3TestServer": "s3_server",
    "EventLog": "recorders",
    "loopback_only": "recorders",
}

__all__ = [
    "ConformanceSuite",
    "EventLog",
    "FakeClock",
    "FakeOpenAIServer",
    "Fault",
    "IndexBackendSuite",
    "ModelBackendSuite",
    "ModelCall",
    "ModelFault",
    "RecordedRequest",
    "S3Fault",
    "S3TestServer",
    "ScriptedModel",
    "WorkspaceSuite",
    "loopback_only",
    "run_at_once",
    "suite_integrity_problems",
    "suite_override",
]


def __getattr__(name: str) -> Any:
    if name in _SUITES:
        from importlib import import_module

        return getattr(import_module(f"harnessmem.testing.{_SUITES[name]}"), name)
    raise AttributeError(f"module 'harnessmem.testing' has no attribute {name!r}")
