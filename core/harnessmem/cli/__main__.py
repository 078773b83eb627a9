"""``python -m harnessmem.cli``: the same as the ``harnessmem`` command."""

from harnessmem.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
