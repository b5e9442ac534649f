"""The examples in the package's docstrings run and print what they show.

One of them (``student_two_sided_p``) claimed a value its code did not give, and nothing ran it. Every module of
``ctcalc_spark`` whose source holds a ``>>>`` example is found here (none is listed by hand, so a new example is
run without an edit to this file) and run with :mod:`doctest`.
"""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ctcalc_spark"


def _modules_with_examples() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>> " in path.read_text(encoding="utf-8"):
            rel = path.relative_to(PACKAGE.parent).with_suffix("")
            names.append(".".join(p for p in rel.parts if p != "__init__"))
    return names


MODULES = _modules_with_examples()


def test_examples_are_found() -> None:
    # The package has examples in several layers (core math, redaction, path safety); finding none would mean
    # the search above broke, and every test below would pass by running nothing.
    assert len(MODULES) >= 5, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True)
    assert result.attempted > 0, f"{name} has '>>> ' in its source but doctest found no example to run"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (printed above)"
