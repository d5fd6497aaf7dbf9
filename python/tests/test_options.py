"""The package's doors hold to the library's one description of its options
(``fastwrite::described``, here ``_native.KEYWORDS``): each public function takes exactly the
keywords it lists, the engine's stub hands them over as ``**options``, and docs/python.md gives
each function's whole signature."""

from __future__ import annotations

import inspect
import pathlib
import re
from typing import Any, Callable

import fastwrite
from fastwrite import _native

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "extract": fastwrite.extract,
    "list": fastwrite.list,
    "mirror": fastwrite.mirror,
    "extract_many": fastwrite.extract_many,
    "Batch": fastwrite.Batch.__init__,
}
ROOT = pathlib.Path(__file__).resolve().parents[2]


def keyword_only(function: Callable[..., Any]) -> list[str]:
    parameters = inspect.signature(function).parameters.values()
    return [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]


def test_every_function_takes_the_keywords_the_description_lists() -> None:
    assert set(_native.KEYWORDS) == set(FUNCTIONS)
    for name, function in FUNCTIONS.items():
        assert sorted(keyword_only(function)) == sorted(_native.KEYWORDS[name]), name
        assert set(_native.OPTIONS[name]) <= set(_native.KEYWORDS[name]), name


def test_the_engine_stub_takes_the_options_as_keywords() -> None:
    stub = (ROOT / "python" / "fastwrite" / "_native.pyi").read_text()
    for name in ("extract", "list", "mirror", "extract_many"):
        signature = re.search(rf"^def {name}\((.*?)\) ->", stub, re.S | re.M)
        assert signature, name
        assert "**options: Any" in signature.group(1), name
        for keyword in _native.OPTIONS[name]:
            assert f"{keyword}:" not in signature.group(1), (name, keyword)


def test_the_docs_give_every_keyword_of_every_function() -> None:
    docs = (ROOT / "docs" / "python.md").read_text()
    for name, keywords in _native.KEYWORDS.items():
        signature = re.search(rf"^`{name}\((.*?)\)\s*(->[^`]*)?`", docs, re.S | re.M)
        assert signature, f"docs/python.md has no signature line for {name}"
        given = re.findall(r"(\w+)=", signature.group(1))
        assert sorted(given) == sorted(keywords), name


def test_an_unknown_keyword_and_a_wrong_value_are_said() -> None:
    import pytest

    with pytest.raises(TypeError, match="unexpected keyword argument 'fsyncc'"):
        _native.extract("a.zip", "out", fsyncc=True)
    with pytest.raises(ValueError, match="overwrite must be"):
        _native.extract("a.zip", "out", overwrite="always")
    with pytest.raises(TypeError, match="argument 'threads'"):
        _native.extract("a.zip", "out", threads="four")
