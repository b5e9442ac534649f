"""Every name of ``ctcalc_spark.__all__`` has a numpydoc docstring that matches its signature.

Functions and public methods: a ``Parameters`` section naming exactly the parameters of the signature (when there
are any) and a non-empty ``Returns`` section. Classes: ``Parameters`` naming the constructor's parameters and
``Attributes`` naming only what the class has, every public property among them. Exceptions: a docstring saying
when they are raised. numpydoc is not a dependency, so the sections are read here: a title line underlined with
dashes, and an entry per unindented ``name : type`` line (``a, b : type`` names two).
"""
from __future__ import annotations

import dataclasses
import inspect
from functools import cached_property
from typing import Any, Callable

import pytest

import ctcalc_spark


def sections(doc: str | None) -> dict[str, list[str]]:
    """The numpydoc sections of ``doc``: title -> its lines, dedented."""
    lines = inspect.cleandoc(doc or "").splitlines()
    out: dict[str, list[str]] = {}
    current = None
    i = 0
    while i < len(lines):
        title, under = lines[i].strip(), lines[i + 1].strip() if i + 1 < len(lines) else ""
        if title and under and set(under) == {"-"} and len(under) == len(title):
            current = title
            out[current] = []
            i += 2
            continue
        if current is not None:
            out[current].append(lines[i])
        i += 1
    return out


def entries(lines: list[str]) -> list[str]:
    """The names a section documents: the part before `` : `` of each unindented line, split at commas."""
    names = []
    for line in lines:
        if line.strip() and not line[0].isspace():
            names.extend(n.strip().lstrip("*") for n in line.split(" : ")[0].split(","))
    return names


def _params(func: Callable[..., Any]) -> list[str]:
    return [p for p in inspect.signature(func).parameters if p not in ("self", "cls")]


def function_problems(name: str, func: Callable[..., Any]) -> list[str]:
    """What ``func``'s docstring lacks or gets wrong, one line each (none when it is complete)."""
    doc = sections(func.__doc__)
    problems = []
    if not (func.__doc__ or "").strip():
        return [f"{name}: no docstring"]
    params = _params(func)
    documented = entries(doc.get("Parameters", []))
    if params and not documented:
        problems.append(f"{name}: no Parameters section")
    elif documented != params:
        problems.append(f"{name}: Parameters documents {documented}, the signature has {params}")
    if inspect.signature(func).return_annotation not in ("None", None) and not entries(doc.get("Returns", [])):
        problems.append(f"{name}: no Returns section")
    return problems


def class_problems(name: str, cls: type) -> list[str]:
    """What ``cls``'s docstring, and those of its public methods, lack or get wrong."""
    doc = sections(cls.__doc__)
    problems = []
    if issubclass(cls, Exception):
        if not (cls.__doc__ or "").strip() or cls.__doc__ == Exception.__doc__:
            return [f"{name}: no docstring"]
        if "__init__" not in vars(cls):
            return []
    params = _params(cls)
    documented = entries(doc.get("Parameters", []))
    if documented != params:
        problems.append(f"{name}: Parameters documents {documented}, the constructor has {params}")
    attributes = entries(doc.get("Attributes", []))
    if not attributes:
        problems.append(f"{name}: no Attributes section")
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    problems += [f"{name}: Attributes documents {a!r}, which it does not have" for a in attributes
                 if a not in fields and not hasattr(cls, a) and a not in params]
    for attr, value in vars(cls).items():
        if attr.startswith("_"):
            continue
        if isinstance(value, (property, cached_property)):
            if attr not in attributes:
                problems.append(f"{name}.{attr}: a property missing from Attributes")
        elif isinstance(value, (classmethod, staticmethod)) or inspect.isfunction(value):
            problems += function_problems(f"{name}.{attr}", getattr(cls, attr))
    return problems


def problems_of(name: str, obj: Any) -> list[str]:
    return class_problems(name, obj) if inspect.isclass(obj) else function_problems(name, obj)


@pytest.mark.parametrize("name", ctcalc_spark.__all__)
def test_public_name_has_numpydoc(name: str) -> None:
    assert problems_of(name, getattr(ctcalc_spark, name)) == []


def test_docstring_check_finds_each_problem() -> None:
    def bare(y, z):  # type: ignore[no-untyped-def]
        return y

    def wrong(y: int, *, weight: float = 1.0) -> int:
        """Sum.

        Parameters
        ----------
        y : int
            A number.
        sample_weight : float
            Not the signature's name.
        """
        return y

    def right(y: int, **cols: float) -> int:
        """Sum.

        Parameters
        ----------
        y : int
            A number.
        **cols : float
            More.

        Returns
        -------
        int
            The sum.
        """
        return y

    @dataclasses.dataclass
    class Box:
        """A box.

        Parameters
        ----------
        size : float
            Its size.
        """

        size: float

        @property
        def volume(self) -> float:
            return self.size ** 3

        def grow(self, by: float) -> float:
            """Grow.

            Returns
            -------
            float
                The new size.
            """
            return self.size + by

    assert problems_of("bare", bare) == ["bare: no docstring"]
    assert problems_of("wrong", wrong) == [
        "wrong: Parameters documents ['y', 'sample_weight'], the signature has ['y', 'weight']",
        "wrong: no Returns section"]
    assert problems_of("right", right) == []
    assert problems_of("Box", Box) == ["Box: no Attributes section", "Box.volume: a property missing from Attributes",
                                       "Box.grow: no Parameters section"]
    assert class_problems("E", type("E", (Exception,), {})) == ["E: no docstring"]
