"""fastwrite: write many files fast, and get every error back.

The engine of the ``fastwrite`` command for Python programs: parallel writers, a pool of
threads that closes files where closing is slow (Windows Defender, NFS, SMB, sshfs and other
FUSE mounts, ``fsync``), every archive name checked before anything is written, and every
failure (a close included) raised with its path. The GIL is released while the engine works.

- `extract` unpacks a zip or a tar (plain, gzip, zstd, xz, bzip2), told by its content.
- `list` lists one, with what `extract` would do to each entry.
- `mirror` makes a folder an exact copy of another.
- `extract_many` unpacks many archives (paths, globs, a bucket listing), each exactly once
  across reruns; `fastwrite.dask.extract_all` does so over a Dask cluster.
- `Batch` writes a program's own files::

      with fastwrite.Batch("MyFont.ufo") as batch:
          batch.write("metainfo.plist", plist_bytes)      # returns at once
          for name, glyph in glyphs.items():
              with batch.open(f"glyphs/{name}.glif") as f: # a file object, for serializers
                  glyph.write_xml(f)
      # here every file is written and closed, or ErrorGroup was raised naming each failure
"""

from __future__ import annotations

import builtins
import io
import os
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any, Callable

from . import _native, _types
from ._errors import Error, ErrorGroup, RunWarning
from ._many import Row, Source, expand, extract_many, set_max_requests_per_second
from ._types import ClosePolicy, OverwritePolicy, StrPath

__all__ = [
    "Batch",
    "BatchFile",
    "Entry",
    "Error",
    "ErrorGroup",
    "Progress",
    "Report",
    "Row",
    "RunWarning",
    "Source",
    "expand",
    "extract",
    "extract_many",
    "list",
    "mirror",
    "set_max_requests_per_second",
]

__version__ = "0.1.0"


@dataclass(frozen=True)
class Report:
    """What a run did. Failures never hide here: a run with any raises `ErrorGroup`, whose
    ``report`` is this."""

    #: Files written and closed.
    files: int
    #: Directories made.
    dirs: int
    #: Symlinks made.
    symlinks: int
    #: Hard links made.
    hardlinks: int
    #: Bytes of file content written.
    bytes: int
    #: Entries not written on purpose (``overwrite="skip"``, device nodes), each also a warning.
    skipped: int
    #: Wall-clock time of the run.
    seconds: float
    #: Writer threads the run had (0 for a batch whose writers never started).
    writers: int
    #: Why that many: asked for, one per core on a local disk, or sized by the latency measured.
    writers_why: str
    #: Threads the close pool had at the end (0: every file closed by its writer).
    close_threads: int
    #: What the run said that is not a failure (also issued as `RunWarning`).
    warnings: tuple[str, ...]
    #: The failures (empty in a report returned; filled in `ErrorGroup.report`).
    failures: tuple[Error, ...]
    #: For a mirror: files already as in the source.
    unchanged: int = 0
    #: For a mirror: entries whose mode or mtime was set.
    updated: int = 0
    #: For a mirror: entries removed from the destination.
    deleted: int = 0
    #: For a mirror with ``dry_run``: what would be done, one line each.
    actions: tuple[str, ...] = ()
    #: For an image from a registry: where it was pulled from (``docker://NAME``, and why
    #: there where registries.conf chose it: a mirror, a search registry, an alias).
    pulled_from: str | None = None


@dataclass(frozen=True)
class Progress:
    """How far a run is, as the ``progress`` callback is told ten times a second or so, on the
    calling thread, and once at the end."""

    #: Files written so far.
    files: int
    #: Bytes written so far.
    bytes: int
    #: Files to write, when known up front (a zip given by its path, a mirror into a folder
    #: that exists), else ``None`` (a tar, a file object, a mirror into a new folder).
    total_files: int | None
    #: Bytes to write, when known up front, else ``None``.
    total_bytes: int | None


@dataclass(frozen=True)
class Entry:
    """One entry of an archive, as `list` shows it."""

    #: ``file``, ``dir``, ``symlink``, ``hardlink``, ``char-device``, ``block-device``,
    #: ``fifo`` or ``other``.
    kind: str
    #: The name as archived (bytes that are not UTF-8 shown as ``\\xNN``).
    name: str
    #: The file's size once extracted (0 for everything but files).
    size: int
    #: Permission bits as archived, if the archive has them.
    mode: int | None
    #: Modification time as archived (seconds since the epoch), if it has one.
    mtime: float | None
    #: A link's target as archived.
    target: str | None
    #: Where `extract` would write it, relative to the output folder; ``None`` if it would not.
    path: str | None
    #: Why `extract` would refuse or skip it.
    problem: str | None
    #: Its owner's user and group ids as archived (a tar's; a zip's where Info-ZIP's Unix
    #: field holds them), as `tarfile.TarInfo.uid` and ``gid``; ``None`` where it has none.
    uid: int | None = None
    gid: int | None = None
    #: Its owner's user and group names as archived (a tar's), as `tarfile.TarInfo.uname` and
    #: ``gname``; ``None`` where it has none.
    user: str | None = None
    group: str | None = None


def _path(path: StrPath) -> str:
    return os.fsdecode(path)


def _archive(archive: StrPath | IO[bytes], what: str) -> tuple[Any, str | None, str | None]:
    """A path as a ``str``; or a binary file object as it is, with the label naming it in
    messages and its name (an opened file's path: an error's ``filename``), if it has one. A
    text file object raises `TypeError` here, before anything is read (``what`` is the call)."""
    if not hasattr(archive, "read"):
        return _path(archive), None, None
    if _reads_text(archive):
        raise TypeError(
            f"fastwrite.{what}() reads an archive from a path or a binary file object (opened "
            f"with 'rb'), not from a text one: {archive!r}"
        )
    name = getattr(archive, "name", None)
    if isinstance(name, (str, bytes)):  # (an int is a descriptor, no name)
        name = os.fsdecode(name)
        return archive, f"'{name}'", name
    return archive, repr(archive), None


def _reads_text(file: Any) -> bool:
    """Whether a file object reads ``str``: a text file (``open(path)``, ``io.StringIO``,
    ``sys.stdin``), or, if it is no `io.IOBase`, one whose ``read(0)`` returns a ``str``."""
    if isinstance(file, io.IOBase):
        return isinstance(file, io.TextIOBase)
    try:
        return isinstance(file.read(0), str)
    except Exception:
        return False  # its read fails again in the run, which says how


def _progress(callback: Callable[[Progress], object] | None) -> Callable[..., Any] | None:
    if callback is None:
        return None
    return lambda files, nbytes, total_files, total_bytes: callback(
        Progress(files, nbytes, total_files, total_bytes)
    )


def _report(d: dict[str, Any], what: str, stacklevel: int = 3) -> Report:
    """The `Report` of a run's dict; raises what stopped it, or every failure it had."""
    stopped = d.pop("stopped", None)
    report = Report(**d)
    for warning in report.warnings:
        warnings.warn(warning, RunWarning, stacklevel=stacklevel)
    failures = builtins.list(report.failures)
    if stopped is not None:
        # Ctrl-C (or the progress callback's exception): raised as it is, carrying what the
        # run met before it stopped.
        real = [f for f in failures if f.kind != "cancelled"]
        _attach(stopped, real, report)
        raise stopped
    if failures:
        raise ErrorGroup(_message(failures, what), failures, report)
    return report


def _message(errors: builtins.list[Error], what: str) -> str:
    if len(errors) == 1:
        return f"{what}: {errors[0]}"
    return f"{what}: {len(errors)} errors, the first: {errors[0]}"


def _attach(exception: BaseException, errors: builtins.list[Error], report: Report | None) -> None:
    """Lets an exception that stopped a run carry the run's own failures: attributes
    ``fastwrite_errors`` and ``fastwrite_report``, and a note per failure (Python 3.11+)."""
    exception.fastwrite_errors = errors  # type: ignore[attr-defined]
    exception.fastwrite_report = report  # type: ignore[attr-defined]
    if sys.version_info >= (3, 11):
        for error in errors:
            exception.add_note(f"fastwrite: {error}")


def extract(
    archive: StrPath | IO[bytes],
    out: StrPath,
    *,
    patterns: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    strip_components: int = 0,
    overwrite: OverwritePolicy = "refuse",
    password: str | bytes | None = None,
    max_output: int | None = None,
    threads: int | None = None,
    close: ClosePolicy = "auto",
    fsync: bool = False,
    atomic: bool = False,
    file_name: str | None = None,
    space_check: bool = True,
    devices: bool = False,
    progress: Callable[[Progress], object] | None = None,
    folder_markers: bool = False,
    retries: int | None = None,
    retry_timeout: int | None = None,
    platform: str | None = None,
    insecure_registry: bool = False,
    layers_cache: StrPath | None = None,
) -> Report:
    """Extracts ``archive`` into the folder ``out`` (made if missing) and returns the `Report`.

    ``archive`` is a path, or a binary file object (anything with ``read``), read once as a
    stream, as ``fastwrite extract -`` reads standard input: a tar plain or compressed, a zip
    read by its local headers (give a zip's path when there is one), or a single compressed
    file (``notes.txt.gz``, written as one file, named by ``file_name``, else by its gzip header,
    else, given by its path, by its own name less the suffix). Zip or tar, plain or gzip, zstd,
    xz or bzip2 is told by the content, never by the name. A file object is named in messages
    by its ``name`` where it has one (an opened file); one opened in text mode raises
    `TypeError` before anything is read.

    Every name is checked before anything is written: an absolute path, ``..``, a link out of
    ``out`` is refused (kind ``refused``) and the rest is written. Nothing is written outside
    ``out``; an existing file is kept (kind ``already-exists``) unless ``overwrite`` says
    otherwise. A run into a new or empty folder puts the files under their names only at the
    end, and a killed run leaves no partial file under a final name.

    - ``patterns``: only entries matching one of these (GNU tar's rules: ``*`` crosses ``/``,
      a directory takes what is in it); one that matches nothing is a failure (``not-found``).
    - ``exclude``: leave out entries matching any of these. ``strip_components``: remove this
      many leading components of every name (``tar --strip-components``).
    - ``password``: an encrypted zip's (AES or ZipCrypto). ``max_output``: the most bytes the
      run may write (a defence against decompression bombs; kind ``limit``).
    - ``threads``: writer threads (default: sized by the run: one per core on a local disk,
      more where a network or FUSE filesystem makes creates round trips). ``close``: how files
      are closed. ``fsync``: make every file durable before it counts as written. ``atomic``:
      the whole tree appears at once, or nothing does.
    - ``space_check``: refuse a zip whose content cannot fit the free space, before writing
      (turn it off on filesystems that compress). ``devices``: create a tar's device nodes and
      FIFOs (needs root; by default they are skipped, each with a `RunWarning`).
    - ``folder_markers``: into a bucket (``out`` ``s3://...`` or ``az://...``), an empty
      ``dir/`` object with its mode and mtime for every folder, not only the empty ones
      (rclone's ``--s3-directory-markers``), so that s3fs and the consoles show the folders'
      times and a mirror down restores them; one request a folder.
    - ``retries``: into or from a store (a bucket, an ``https://`` archive) or a registry, how
      many times a request that failed (no answer, a 5xx, a 429) is tried again, with backoff
      or after the wait its ``Retry-After`` asks for (rclone's
      ``--retries``; default: for S3 ``AWS_MAX_ATTEMPTS`` or the aws profile's
      ``max_attempts``, less one, else 10; ``0``: once only). ``retry_timeout``: the longest a
      request is tried again for, in seconds (default 180).
    - ``platform`` (``"linux/arm64"``, ``"linux/arm/v7"``): which image of a multi-platform
      image (``archive`` ``docker://...``, ``oci:DIR``, ``docker-archive:FILE``: docs/images.md);
      default: this machine's. ``insecure_registry``: speak plain HTTP to a registry that is not
      on this machine. ``layers_cache``: a folder that keeps each layer a registry serves, by
      its digest, so that an image whose layers it holds downloads none of them again. Any of
      these with an input that is not an image raises `Error` (kind ``start``), rather than
      being ignored.
    - ``progress``: called with a `Progress` about ten times a second, on this thread; an
      exception it raises stops the run and is raised.

    Raises `Error` (kind ``start``) if the run cannot start, `ErrorGroup` with every failure
    (and the `Report` of the rest) if any entry failed, and `KeyboardInterrupt` on Ctrl-C,
    once what was written is closed and checked (the entries it had not reached are not
    written).
    """
    source, label, name = _archive(archive, "extract")
    d = _native.extract(
        source,
        _path(out),
        label=label,
        name=name,
        progress=_progress(progress),
        **_types.options(locals(), "extract"),
    )
    return _report(d, f"extracting {label or repr(_path(archive))}")  # type: ignore[arg-type]


def list(
    archive: StrPath | IO[bytes],
    *,
    patterns: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    strip_components: int = 0,
    platform: str | None = None,
    insecure_registry: bool = False,
    layers_cache: StrPath | None = None,
    retries: int | None = None,
    retry_timeout: int | None = None,
) -> builtins.list[Entry]:
    """The entries of ``archive`` (a path or a binary file object, as for `extract`), in
    archive order, with what `extract` would do to each (``path``, ``problem``); nothing is
    written. ``patterns``, ``exclude`` and ``strip_components`` choose as for `extract`; an
    image is listed as the tree it makes, in path order, and ``platform``,
    ``insecure_registry`` and ``layers_cache`` choose it and how it is fetched, and
    ``retries`` and ``retry_timeout`` how a store's or a registry's requests are tried again,
    as for `extract`.

    Raises `Error` (kind ``start``) if the archive cannot be read at all, and `ErrorGroup`
    (with ``entries``: those listed, every one) where `extract` would fail too: an entry it
    would refuse (listed with its ``problem``), an archive that breaks part-way, a pattern that
    matches nothing. What `extract` would warn of (a zip's directory mended, an entry stored
    twice) is issued as `RunWarning`, as `extract` issues it.
    """
    source, label, name = _archive(archive, "list")
    rows, failures, said = _native.list(
        source, label=label, name=name, **_types.options(locals(), "list")
    )
    entries = [
        Entry(
            kind,
            name,
            size,
            mode,
            mtime,
            target,
            None if path is None else os.fsdecode(path),
            problem,
            *owner,
        )
        for (kind, name, size, mode, mtime, target, path, problem, owner) in rows
    ]
    for warning in said:
        warnings.warn(warning, RunWarning, stacklevel=2)
    if failures:
        errors: builtins.list[Error] = builtins.list(failures)
        what = f"listing {label or repr(_path(archive))}"  # type: ignore[arg-type]
        raise ErrorGroup(_message(errors, what), errors, None, entries)
    return entries


def mirror(
    src: StrPath,
    dst: StrPath,
    *,
    delete: bool = False,
    dry_run: bool = False,
    exclude: Iterable[str] = (),
    checksum: bool = False,
    hard_links: bool = False,
    copy_links: bool = False,
    threads: int | None = None,
    close: ClosePolicy = "auto",
    fsync: bool = False,
    progress: Callable[[Progress], object] | None = None,
    folder_markers: bool = False,
    retries: int | None = None,
    retry_timeout: int | None = None,
) -> Report:
    """Makes ``dst`` an exact copy of the contents of ``src``, like ``rsync -a src/ dst/``:
    files, modes, mtimes, symlinks, empty directories. A second run copies only what changed
    (size and mtime, or content with ``checksum``).

    - ``delete``: remove from ``dst`` what ``src`` does not have (never excluded paths).
    - ``dry_run``: change nothing; the report's ``actions`` say what would be done.
    - ``exclude``: glob patterns left out (``NAME`` at any depth, ``a/b`` from the top,
      ``dir/`` directories only; ``*`` stops at ``/``, ``**`` does not).
    - ``hard_links``: files hard-linked together in ``src`` are so in ``dst``.
      ``copy_links``: follow symlinks in ``src``.
    - ``threads``, ``close``, ``fsync``, ``progress``, ``folder_markers`` (``dst`` a bucket
      prefix), ``retries``, ``retry_timeout``: as for `extract`.

    Raises `Error` (kind ``start``) if it cannot start (``src`` missing, one folder inside the
    other), `ErrorGroup` with every failure and the `Report`, or `KeyboardInterrupt`.
    """
    d = _native.mirror(
        _path(src),
        _path(dst),
        progress=_progress(progress),
        **_types.options(locals(), "mirror"),
    )
    return _report(d, f"mirroring {_path(src)!r} to {_path(dst)!r}")


class BatchFile(io.BytesIO):
    """A file of a `Batch`, written as a binary file object (what `Batch.open` returns), for
    serializers: ``json.dump`` through ``io.TextIOWrapper``, ``ElementTree.write``,
    ``pickle.dump``, ``plistlib.dump``.

    Its content is held in memory and handed to the batch's writers by ``close`` (or the end
    of its ``with`` block), which returns at once. A ``with`` block that ends by an exception
    drops the file: half a serialization never lands under a name. What happens to the file
    after ``close`` comes back from the batch's end, as for `Batch.write`.
    """

    def __init__(self, batch: Batch, path: str, mode: int | None, mtime: float | None) -> None:
        super().__init__()
        self._batch = batch
        self._path = path
        self._mode = mode
        self._mtime = mtime
        self._dropped = False

    @property
    def name(self) -> str:
        """The path it was opened for, relative to the batch's root."""
        return self._path

    def close(self) -> None:
        """Hands the file to the batch (once; later calls do nothing)."""
        if self.closed:
            return
        try:
            if not self._dropped:
                self._batch._hand_over(self)
        finally:
            self._batch._open.discard(self)
            super().close()

    def drop(self) -> None:
        """Closes the file without writing it."""
        self._dropped = True
        self.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.drop()
        else:
            self.close()


class Batch:
    """Many files written under ``root`` (made if missing), fast wherever closing a file is
    slow, with every error back. Use it as a context manager::

        with fastwrite.Batch("out") as batch:
            batch.write("a/b.txt", b"data")          # returns at once
            with batch.open("c.xml") as f:            # a file object
                tree.write(f)

    `write` hands a whole file to the batch's writers and returns at once: one Python thread
    keeps many files in flight, the GIL released while they are created, written and closed.
    Leaving the ``with`` block waits for every write and close and raises `ErrorGroup` naming
    each file that failed (a failed close, a full disk, an existing file, a refused path); it
    also ends the batch when the block raised, and then raises that exception, chained from the
    group if the batch failed too. Ctrl-C while it waits cancels what has not started and
    raises `KeyboardInterrupt` once the rest is closed.

    A batch into a new or empty folder writes in a staging folder beside it (or inside it) and
    puts the files in place at the end; into a folder that holds files, each file is written
    under a temporary name and renamed to its own after its close. Either way a killed process
    leaves no partial file under a final name.

    - ``overwrite``: what to do with a file that exists (default ``refuse``: the write fails
      with kind ``already-exists`` and the file is kept).
    - ``close``: how files are closed (default ``auto``). ``fsync``: make every file durable.
    - ``atomic``: the folder appears with every file only if the batch ends without an error.
    - ``writers``: the writer threads (default: sized by the filesystem, as for `extract`).

    A batch is safe to share between threads.
    """

    def __init__(
        self,
        root: StrPath,
        *,
        overwrite: OverwritePolicy = "refuse",
        close: ClosePolicy = "auto",
        fsync: bool = False,
        atomic: bool = False,
        writers: int | None = None,
    ) -> None:
        self._open: set[BatchFile] = set()
        self._taken: builtins.list[Error] = []
        #: The `Report`, once the batch has ended.
        self.report: Report | None = None
        self._native = _native.Batch(
            _path(root),
            overwrite=overwrite,
            close=close,
            fsync=fsync,
            atomic=atomic,
            writers=writers,
        )

    @property
    def root(self) -> str:
        """The folder the files go under."""
        return os.fsdecode(self._native.root)

    @property
    def closed(self) -> bool:
        """Whether the batch has ended."""
        return bool(self._native.closed)

    def write(
        self,
        path: StrPath,
        data: str | bytes | bytearray | memoryview,
        *,
        mode: int | None = None,
        mtime: float | None = None,
    ) -> None:
        """Writes ``data`` to the file at ``path`` (relative to the root; parents are made),
        and returns at once: the batch's writers create, write and close it. ``data`` is any
        bytes-like object (``bytes``, ``bytearray``, ``memoryview``, ``array``), or a ``str``,
        written as UTF-8. ``mode`` (e.g. ``0o755``) and ``mtime`` (seconds since the epoch) are
        set if given.

        Raises `Error` now for a path the batch refuses (absolute, ``..``, a name the system
        cannot hold: a `PermissionError`), and `TypeError` for ``data`` of another type; what
        happens to the file later comes back when the batch ends.
        """
        if isinstance(data, str):
            data = data.encode()
        elif not isinstance(data, (bytes, bytearray)):
            try:
                data = memoryview(data).tobytes()
            except TypeError:
                raise TypeError(
                    "Batch.write() data must be str or a bytes-like object, "
                    f"not {type(data).__name__!r}"
                ) from None
        self._native.write(_path(path), data, mode, mtime)

    def open(
        self, path: StrPath, *, mode: int | None = None, mtime: float | None = None
    ) -> BatchFile:
        """A binary file object for the file at ``path``, written when it is closed (see
        `BatchFile`). A path the batch refuses raises `Error` (a `PermissionError`) here. Files
        still open when the batch ends are written then, unless the ``with`` block ended by an
        exception."""
        path = _path(path)
        self._native.check(path)  # a refused path fails here, as open() fails
        file = BatchFile(self, path, mode, mtime)
        self._open.add(file)
        return file

    def _hand_over(self, file: BatchFile) -> None:
        self._native.write(file.name, file.getvalue(), file._mode, file._mtime)

    def mkdir(self, path: StrPath, *, mode: int | None = None, mtime: float | None = None) -> None:
        """Makes the directory at ``path`` (and its parents) now; its ``mode`` and ``mtime``,
        if given, are set at the end, once everything inside it is written."""
        self._native.mkdir(_path(path), mode, mtime)

    def symlink(self, path: StrPath, target: StrPath) -> None:
        """Makes a symlink at ``path`` pointing to ``target``, at the end (after every file is
        written, so nothing is written through it). The target must stay inside the root."""
        self._native.symlink(_path(path), _path(target))

    def take_errors(self) -> builtins.list[Error]:
        """The failures met so far out of sight (failed closes, background writes), to act on
        early. The batch's end still raises for them."""
        errors = builtins.list(self._native.take_errors())
        self._taken.extend(errors)
        return errors

    def cancel(self) -> None:
        """Stops the batch: later writes fail with kind ``cancelled``; files handed over and
        not yet started are dropped; what was written is still closed and checked."""
        self._native.cancel()

    def close(self) -> Report:
        """Ends the batch (what leaving the ``with`` block does): writes the files still open,
        waits for every write and close, makes the symlinks, sets directory metadata, and
        returns the `Report`. Raises `ErrorGroup` with every failure of the batch, those
        `take_errors` returned included. Once ended, a batch's `close` only returns its report
        again (each failure is raised once)."""
        if self.closed and self.report is not None:
            return self.report
        return self._end(None)

    def _end(self, exception: BaseException | None) -> Report:
        interrupted = exception is not None and not isinstance(exception, Exception)
        errors: builtins.list[Error] = []
        for file in builtins.list(self._open):
            if exception is not None:
                file.drop()
                continue
            try:
                file.close()
            except Error as error:
                errors.append(error)
        d = self._native.finish(cancel=interrupted, failed=exception is not None)
        stopped = d.pop("stopped", None)
        report = Report(**d)
        self.report = report
        for warning in report.warnings:
            warnings.warn(warning, RunWarning, stacklevel=3)
        errors += self._taken + builtins.list(report.failures)
        if interrupted or stopped is not None:
            errors = [e for e in errors if e.kind != "cancelled"]
        if stopped is not None:
            _attach(stopped, errors, report)
            raise stopped
        if interrupted:
            assert exception is not None
            _attach(exception, errors, report)
            return report
        if errors:
            group = ErrorGroup(_message(errors, f"the batch under {self.root!r}"), errors, report)
            raise group from exception
        return report

    def __enter__(self) -> Batch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.closed:
            self._end(exc)

    def __del__(self) -> None:
        native = getattr(self, "_native", None)
        if native is None or native.closed:
            return
        warnings.warn(
            f"fastwrite.Batch under {self.root!r} was never closed", ResourceWarning, stacklevel=2
        )
        try:
            self._end(None)
        except ErrorGroup as group:
            warnings.warn(str(group), RuntimeWarning, stacklevel=2)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<fastwrite.Batch {self.root!r} {state}>"
