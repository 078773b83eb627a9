"""Test helpers shipped for harnessmem's own tests and for plugin authors."""
