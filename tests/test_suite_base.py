"""The conformance-suite base refuses a subclass that weakens a suite."""

from __future__ import annotations

import pytest

from harnessmem.testing import ConformanceSuite, suite_integrity_problems, suite_override


class _Suite(ConformanceSuite):
    __harnessmem_suite__ = True

    def test_reads(self) -> None:
        """If this fails, check reading."""

    def test_writes(self) -> None:
        """If this fails, check writing."""


def test_an_untouched_subclass_is_intact() -> None:
    class Faithful(_Suite):
        def helper(self) -> None:
            pass

    assert suite_integrity_problems(Faithful) == []


def test_deleting_a_suite_test_is_caught() -> None:
    class Deletes(_Suite):
        test_writes = None  # type: ignore[assignment]

    assert suite_integrity_problems(Deletes) == ["Deletes.test_writes: suite test deleted"]
    with pytest.raises(AssertionError, match="suite test deleted"):
        Deletes().test_suite_is_intact()


def test_silently_replacing_a_suite_test_is_caught() -> None:
    class Replaces(_Suite):
        def test_reads(self) -> None:
            pass

    class Inherits(Replaces):
        pass

    (problem,) = suite_integrity_problems(Inherits)
    assert problem.startswith("Inherits.test_reads: suite test replaced in")
    assert "Replaces" in problem
    assert "@suite_override(reason)" in problem


def test_a_marked_replacement_is_allowed() -> None:
    class Overrides(_Suite):
        @suite_override("this store has no writes; the read path is tested twice")
        def test_writes(self) -> None:
            pass

    assert suite_integrity_problems(Overrides) == []


def test_override_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="needs a reason"):
        suite_override("  ")


def test_the_integrity_test_itself_cannot_be_overridden() -> None:
    with pytest.raises(TypeError, match="may not override test_suite_is_intact"):

        class Sneaky(_Suite):
            def test_suite_is_intact(self) -> None:
                pass


def test_suites_compose() -> None:
    class More(_Suite):
        __harnessmem_suite__ = True

        def test_lists(self) -> None:
            pass

    class User(More):
        test_reads = None  # type: ignore[assignment]

    class Empties(More):
        test_reads = test_writes = test_lists = None  # type: ignore[assignment]

    assert suite_integrity_problems(User) == ["User.test_reads: suite test deleted"]
    # Both suites' tests are guarded: the base's and the one More adds.
    assert sorted(suite_integrity_problems(Empties)) == [
        f"Empties.{name}: suite test deleted"
        for name in ("test_lists", "test_reads", "test_writes")
    ]
