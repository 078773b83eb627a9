"""harnessmem benchmarks: ``python -m bench [--quick]`` or ``nox -s bench``."""
