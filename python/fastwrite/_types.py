"""The types the package's calls take, shared by its modules (and exported by `fastwrite`)."""

from __future__ import annotations

import os
from typing import Literal, Union

from . import _native

#: A path as Python spells one.
StrPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: What to do with a file that exists: keep it and fail the entry (``refuse``, the default),
#: replace it (``replace``: written aside, renamed over it after a good close), keep it and
#: skip the entry (``skip``), replace it only if older (``update``).
OverwritePolicy = Literal["refuse", "replace", "skip", "update"]
#: How written files are closed: ``auto`` (on a pool of threads where closing is measured to be
#: slow, inline where it is fast), ``inline`` (by the thread that wrote the file), ``deferred``
#: (always on the pool), or a number: the pool's threads.
ClosePolicy = Union[Literal["auto", "inline", "deferred"], int]


def options(given: dict[str, object], function: str) -> dict[str, object]:
    """The keyword arguments a call was given for the library's options, as the library's one
    description of them lists them for ``function`` (``_native.OPTIONS``): what the engine
    takes from this package's functions, and converts itself."""
    return {keyword: given[keyword] for keyword in _native.OPTIONS[function]}
