"""The exceptions of fastwrite: one failure (`Error`, and the family that joins it with each of
Python's errno classes) and every failure of a run (`ErrorGroup`)."""

from __future__ import annotations

import builtins
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from . import Entry, Report


class Error(OSError):
    """One failure, with the path it concerns.

    An `OSError`: ``errno`` is the operating system's error behind it (``errno.ENOSPC`` for a
    full disk, ``errno.EIO`` for a failed close), or the nearest one for a failure that has
    none (``EEXIST`` for ``already-exists``, ``EPERM`` for ``refused``); ``strerror`` is the
    whole story, every cause from the outermost.

    As ``OSError(errno, ...)`` does, ``Error(errno, ...)`` is also the subclass of `OSError`
    Python gives that errno: a missing archive is a `FileNotFoundError`, an existing file a
    `FileExistsError`, a refused path a `PermissionError` (so are ``EACCES`` and ``EPERM`` from
    the system), ``EISDIR`` an `IsADirectoryError`, ``ENOTDIR`` a `NotADirectoryError`, and so
    on. ``except FileNotFoundError``, ``except OSError`` and ``except fastwrite.Error`` all
    catch it. An errno Python has no subclass for (``ENOSPC``, ``EIO``), or none, leaves it a
    plain `Error`.

    ``filename`` is where the file was to be: the output folder joined with ``path`` (``.``
    and empty names dropped), never a place outside it. It is ``None`` where there is no such
    place: a ``refused`` entry (its name may leave the folder: ``../x``, ``/etc/x``, a drive
    letter, a link pointing out), a ``not-found`` pattern, a name with ``..`` or a root in it,
    and the entries of a run with ``strip_components`` (their ``path`` is the name as
    archived). For a run that could not start it is the archive's path or file object's name.

    Attributes beyond OSError's:

    - ``kind``: what went wrong, for a program to match: ``refused`` (a path leaving the output
      folder, a name the system cannot hold), ``already-exists``, ``directory``, ``write``,
      ``close``, ``metadata``, ``link``, ``source`` (a corrupt archive entry), ``delete``,
      ``unfinished`` (a file opened with `Batch.open` and dropped), ``cancelled``, ``limit``
      (``max_output``), ``unverified`` (a compressed archive's check failed after the file was
      written: it was removed), ``not-found`` (a pattern matched nothing), and ``start`` (the
      run could not start: the archive is missing or unrecognised, the output unwritable).
    - ``path``: the path as the program or the archive named it (relative to the output folder).
    - ``key``: in a run into a bucket (``s3://BUCKET/PREFIX``, ``az://CONTAINER/PREFIX``), the
      object the failure concerns, as ``s3://BUCKET/KEY`` (``filename`` is then ``None``: there
      is no file); else ``None``.
    - ``code``: the object store's own error code the message names (``NoSuchBucket``,
      ``SignatureDoesNotMatch``, ``ContainerNotFound``), for a program to match; else ``None``.
    """

    kind: str
    path: str
    key: str | None = None
    code: str | None = None

    def __new__(cls, *args: Any) -> Error:
        if cls is Error and args and isinstance(args[0], int):
            # Python's own choice: the class ``OSError(errno, ...)`` would be.
            cls = _JOINED.get(type(OSError(args[0], "")), Error)
        return super().__new__(cls, *args)

    def __str__(self) -> str:
        path = getattr(self, "path", "")
        if path and getattr(self, "kind", "") != "start":
            return f"'{path}': {self.strerror}"
        return str(self.strerror)

    def __reduce__(self) -> Any:
        # Built again by errno (so as the same class), with `kind`, `path` and any notes.
        return (Error, (self.errno, self.strerror, self.filename), self.__dict__)


# The family: an `Error` that is also the builtin `OSError` subclass Python picks for its errno,
# one class for each, named as that builtin. Programs catch them by the builtin (or by `Error`):
# these names are not exported, so that `from fastwrite import *` shadows no builtin.
# fmt: off
class BlockingIOError(Error, builtins.BlockingIOError): ...
class BrokenPipeError(Error, builtins.BrokenPipeError): ...
class ChildProcessError(Error, builtins.ChildProcessError): ...
class ConnectionAbortedError(Error, builtins.ConnectionAbortedError): ...
class ConnectionRefusedError(Error, builtins.ConnectionRefusedError): ...
class ConnectionResetError(Error, builtins.ConnectionResetError): ...
class FileExistsError(Error, builtins.FileExistsError): ...
class FileNotFoundError(Error, builtins.FileNotFoundError): ...
class InterruptedError(Error, builtins.InterruptedError): ...
class IsADirectoryError(Error, builtins.IsADirectoryError): ...
class NotADirectoryError(Error, builtins.NotADirectoryError): ...
class PermissionError(Error, builtins.PermissionError): ...
class ProcessLookupError(Error, builtins.ProcessLookupError): ...
class TimeoutError(Error, builtins.TimeoutError): ...
# fmt: on


#: The family's class for each builtin it joins.
_JOINED: dict[type, type[Error]] = {
    builtin: joined
    for joined in Error.__subclasses__()
    for builtin in joined.__bases__
    if builtin is not Error
}


if sys.version_info >= (3, 11):

    class ErrorGroup(ExceptionGroup):  # noqa: F821 (a builtin from 3.11)
        """Every failure of a run or a batch, raised once it has ended.

        An `ExceptionGroup` of `Error` (so ``except* fastwrite.Error`` works), with:

        - ``errors``: the failures, a list of `Error`, in a stable order;
        - ``report``: the `Report` of what the run did nevertheless (`extract`, `mirror`,
          `Batch`), or ``None``;
        - ``entries``: for `list`, the entries listed before the failure, else ``None``;
        - ``rows``: for `extract_many`, every source's report (a dict each), else ``None``.

        Before Python 3.11 it is a plain `Exception` with the same attributes (and
        ``exceptions``, the same list).
        """

        report: Report | None
        entries: list[Entry] | None
        rows: list[dict[str, Any]] | None

        def __new__(
            cls,
            message: str,
            errors: Sequence[Error],
            report: Report | None = None,
            entries: list[Entry] | None = None,
            rows: list[dict[str, Any]] | None = None,
        ) -> ErrorGroup:
            group = super().__new__(cls, message, list(errors))
            group.report = report
            group.entries = entries
            group.rows = rows
            return group

        def __init__(
            self,
            message: str,
            errors: Sequence[Error],
            report: Report | None = None,
            entries: list[Entry] | None = None,
            rows: list[dict[str, Any]] | None = None,
        ) -> None:
            super().__init__(message, list(errors))

        @property
        def errors(self) -> list[Error]:
            """The failures, each an `Error` with its path and kind."""
            return [cast(Error, e) for e in self.exceptions]

        def derive(self, excs: Sequence[Error]) -> ErrorGroup:  # type: ignore[override]
            return ErrorGroup(self.message, excs, self.report, self.entries, self.rows)

else:

    class ErrorGroup(Exception):
        """Every failure of a run or a batch, raised once it has ended.

        ``errors`` (also ``exceptions``) holds the failures, a list of `Error`; ``report`` the
        `Report` of what the run did nevertheless, or ``None``; ``entries``, for `list`, the
        entries listed before the failure; ``rows``, for `extract_many`, every source's report.
        From Python 3.11 it is an `ExceptionGroup`.
        """

        def __init__(
            self,
            message: str,
            errors: Sequence[Error],
            report: Report | None = None,
            entries: list[Entry] | None = None,
            rows: list[dict[str, Any]] | None = None,
        ) -> None:
            super().__init__(message, list(errors))
            self.message = message
            self.errors = list(errors)
            self.exceptions = tuple(self.errors)
            self.report = report
            self.entries = entries
            self.rows = rows

        def __str__(self) -> str:
            return self.message


class RunWarning(UserWarning):
    """Something a run says that is not a failure: an entry type skipped (a device node without
    ``devices``), a name stored twice in an archive. Also in `Report.warnings`."""
