"""The engine's calls (Rust, PyO3), kept low-level: `fastwrite` wraps them in its public API."""

from typing import IO, Any, Callable, Optional, Union

#: Bytes of file content a streamed archive may hold in memory between reader and writers.
DEFAULT_MEMORY_BUDGET: int

def extract(
    archive: Union[str, IO[bytes]],
    out: str,
    *,
    label: Optional[str] = None,
    patterns: list[str] = ...,
    exclude: list[str] = ...,
    strip_components: int = 0,
    overwrite: str = "refuse",
    password: Optional[bytes] = None,
    max_output: Optional[int] = None,
    threads: Optional[int] = None,
    close: Union[str, int, None] = None,
    fsync: bool = False,
    atomic: bool = False,
    progress: Optional[Callable[[int, int, int, int], object]] = None,
    file_name: Optional[str] = None,
    space_check: bool = True,
    devices: bool = False,
) -> dict[str, Any]:
    """Extracts; the report as a dict (its ``failures`` as `fastwrite.Error`, ``stopped``: the
    exception that stopped the run, if one did). Raises `fastwrite.Error` if it cannot start."""

def list(
    archive: Union[str, IO[bytes]],
    *,
    label: Optional[str] = None,
    patterns: list[str] = ...,
    exclude: list[str] = ...,
    strip_components: int = 0,
) -> tuple[
    list[tuple[str, str, int, Optional[int], Optional[float], Optional[str], Optional[str], Optional[str]]],
    tuple[Any, ...],
]:
    """The entries (kind, name, size, mode, mtime, target, path, problem) and the failures."""

def mirror(
    src: str,
    dst: str,
    *,
    delete: bool = False,
    dry_run: bool = False,
    exclude: list[str] = ...,
    checksum: bool = False,
    hard_links: bool = False,
    copy_links: bool = False,
    threads: Optional[int] = None,
    close: Union[str, int, None] = None,
    fsync: bool = False,
    progress: Optional[Callable[[int, int, int, int], object]] = None,
) -> dict[str, Any]:
    """Mirrors; the report as a dict, as for `extract`."""

class Batch:
    """The engine's batch; `fastwrite.Batch` wraps it."""

    def __init__(
        self,
        root: str,
        *,
        overwrite: str = "refuse",
        close: Union[str, int, None] = None,
        fsync: bool = False,
        atomic: bool = False,
        writers: Optional[int] = None,
    ) -> None: ...
    @property
    def root(self) -> str:
        """The folder the files go under."""
    @property
    def closed(self) -> bool:
        """Whether `finish` has run."""
    def write(
        self, path: str, data: Union[bytes, bytearray], mode: Optional[int] = None, mtime: Optional[float] = None
    ) -> None:
        """Hands a whole file to the batch's writers and returns."""
    def mkdir(self, path: str, mode: Optional[int] = None, mtime: Optional[float] = None) -> None:
        """Makes a directory now; its mode and mtime at the end."""
    def symlink(self, path: str, target: str) -> None:
        """A symlink, made at the end."""
    def take_errors(self) -> list[Any]:
        """The errors met out of sight so far."""
    def cancel(self) -> None:
        """Stops the batch."""
    def finish(self, *, cancel: bool = False, failed: bool = False) -> dict[str, Any]:
        """Waits for every write and close; the report as a dict, failures included. ``failed``:
        the program's work failed (an atomic batch is then not put in place)."""
