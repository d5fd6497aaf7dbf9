"""The exceptions of fastwrite: one failure (`Error`) and every failure of a run (`ErrorGroup`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from . import Entry, Report


class Error(OSError):
    """One failure, with the path it concerns.

    An `OSError`: ``errno`` is the operating system's error behind it (``errno.ENOSPC`` for a
    full disk, ``errno.EIO`` for a failed close), or the nearest one for a failure that has
    none (``EEXIST`` for ``already-exists``, ``EPERM`` for ``refused``); ``filename`` is where
    the file was to be; ``strerror`` is the whole story, every cause from the outermost.

    Attributes beyond OSError's:

    - ``kind``: what went wrong, for a program to match: ``refused`` (a path leaving the output
      folder, a name the system cannot hold), ``already-exists``, ``directory``, ``write``,
      ``close``, ``metadata``, ``link``, ``source`` (a corrupt archive entry), ``delete``,
      ``unfinished`` (a file opened with `Batch.open` and dropped), ``cancelled``, ``limit``
      (``max_output``), ``unverified`` (a compressed archive's check failed after the file was
      written: it was removed), ``not-found`` (a pattern matched nothing), and ``start`` (the
      run could not start: the archive is missing or unrecognised, the output unwritable).
    - ``path``: the path as the program or the archive named it (relative to the output folder).
    """

    kind: str
    path: str

    def __str__(self) -> str:
        path = getattr(self, "path", "")
        if path and getattr(self, "kind", "") != "start":
            return f"'{path}': {self.strerror}"
        return str(self.strerror)

    def __reduce__(self) -> Any:
        return (_rebuild, (self.errno, self.strerror, self.filename, self.kind, self.path))


def _rebuild(errno: int | None, strerror: str, filename: Any, kind: str, path: str) -> Error:
    error = Error(errno, strerror, filename)
    error.kind = kind
    error.path = path
    return error


if sys.version_info >= (3, 11):

    class ErrorGroup(ExceptionGroup):  # noqa: F821 (a builtin from 3.11)
        """Every failure of a run or a batch, raised once it has ended.

        An `ExceptionGroup` of `Error` (so ``except* fastwrite.Error`` works), with:

        - ``errors``: the failures, a list of `Error`, in a stable order;
        - ``report``: the `Report` of what the run did nevertheless (`extract`, `mirror`,
          `Batch`), or ``None``;
        - ``entries``: for `list`, the entries listed before the failure, else ``None``.

        Before Python 3.11 it is a plain `Exception` with the same attributes (and
        ``exceptions``, the same list).
        """

        report: Report | None
        entries: list[Entry] | None

        def __new__(
            cls,
            message: str,
            errors: Sequence[Error],
            report: Report | None = None,
            entries: list[Entry] | None = None,
        ) -> ErrorGroup:
            group = super().__new__(cls, message, list(errors))
            group.report = report
            group.entries = entries
            return group

        def __init__(
            self,
            message: str,
            errors: Sequence[Error],
            report: Report | None = None,
            entries: list[Entry] | None = None,
        ) -> None:
            super().__init__(message, list(errors))

        @property
        def errors(self) -> list[Error]:
            """The failures, each an `Error` with its path and kind."""
            return [cast(Error, e) for e in self.exceptions]

        def derive(self, excs: Sequence[Error]) -> ErrorGroup:  # type: ignore[override]
            return ErrorGroup(self.message, excs, self.report, self.entries)

else:

    class ErrorGroup(Exception):
        """Every failure of a run or a batch, raised once it has ended.

        ``errors`` (also ``exceptions``) holds the failures, a list of `Error`; ``report`` the
        `Report` of what the run did nevertheless, or ``None``; ``entries``, for `list`, the
        entries listed before the failure. From Python 3.11 it is an `ExceptionGroup`.
        """

        def __init__(
            self,
            message: str,
            errors: Sequence[Error],
            report: Report | None = None,
            entries: list[Entry] | None = None,
        ) -> None:
            super().__init__(message, list(errors))
            self.message = message
            self.errors = list(errors)
            self.exceptions = tuple(self.errors)
            self.report = report
            self.entries = entries

        def __str__(self) -> str:
            return self.message


class RunWarning(UserWarning):
    """Something a run says that is not a failure: an entry type skipped (a device node without
    ``devices``), a name stored twice in an archive. Also in `Report.warnings`."""
