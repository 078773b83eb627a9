"""The base every conformance suite derives from.

A suite is a pytest test class shipped in ``harnessmem.testing``. A backend's
test module subclasses it and overrides one fixture. The suite's tests are the
contract, so a subclass may not delete or replace one silently: it must mark
the replacement with :func:`suite_override` and give a reason. The check runs
as a test of the suite itself (``test_suite_is_intact``), so a weakened suite
fails in the plugin author's own test run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

__all__ = ["ConformanceSuite", "suite_integrity_problems", "suite_override"]

F = TypeVar("F", bound=Callable[..., Any])

_OVERRIDE_ATTR = "__harnessmem_suite_override__"


def suite_override(reason: str) -> Callable[[F], F]:
    """Mark a subclass method that knowingly replaces a suite test; ``reason`` is required."""
    if not reason or not reason.strip():
        raise ValueError("suite_override needs a reason that says why the suite test is replaced")

    def mark(func: F) -> F:
        setattr(func, _OVERRIDE_ATTR, reason)
        return func

    return mark


class ConformanceSuite:
    """Base class of the shipped suites; collects each suite's own tests."""

    #: Names of tests defined by suites (not by their users), with the defining function.
    _suite_tests: ClassVar[dict[str, Callable[..., Any]]] = {}
    #: Set on a class to declare that it defines suite tests (the shipped suites do).
    __harnessmem_suite__: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        inherited: dict[str, Callable[..., Any]] = {}
        for base in reversed(cls.__mro__[1:]):
            inherited.update(getattr(base, "_suite_tests", {}))
        if cls.__dict__.get("__harnessmem_suite__", False):
            for name, value in cls.__dict__.items():
                if name.startswith("test_") and inspect.isfunction(value):
                    inherited[name] = value
        cls._suite_tests = inherited
        if "test_suite_is_intact" in cls.__dict__ and cls is not ConformanceSuite:
            raise TypeError(f"{cls.__qualname__} may not override test_suite_is_intact")

    def test_suite_is_intact(self) -> None:
        """Fails when this class deletes or silently replaces a suite test.

        If this fails: mark the replacement with ``@suite_override("why")``, or
        remove it so the suite's own test runs.
        """
        problems = suite_integrity_problems(type(self))
        assert not problems, "\n".join(problems)


def suite_integrity_problems(cls: type[ConformanceSuite]) -> list[str]:
    """Every suite test that ``cls`` deleted or replaced without ``suite_override``."""
    problems = []
    for name, original in cls._suite_tests.items():
        current = inspect.getattr_static(cls, name, None)
        if current is original:
            continue
        if current is None or not callable(current):
            problems.append(f"{cls.__name__}.{name}: suite test deleted")
        elif not getattr(current, _OVERRIDE_ATTR, None):
            owner = next((k.__name__ for k in cls.__mro__ if name in k.__dict__), "?")
            problems.append(
                f"{cls.__name__}.{name}: suite test replaced in {owner} "
                "without @suite_override(reason)"
            )
    return problems
