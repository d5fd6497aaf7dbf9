"""The engine's calls (Rust, PyO3), kept low-level: `fastwrite` wraps them in its public API."""

import builtins
from typing import IO, Any, Callable

#: Bytes of file content a streamed archive may hold in memory between reader and writers.
DEFAULT_MEMORY_BUDGET: int
#: The keywords each public function (and ``Batch``) takes, as the library's one description
#: of its options (``fastwrite::described``) lists them.
KEYWORDS: dict[str, builtins.list[str]]
#: Of those, what ``**options`` may hold: the ones the engine sets (the rest each function
#: takes itself).
OPTIONS: dict[str, builtins.list[str]]

def extract(
    archive: str | IO[bytes],
    out: str,
    *,
    label: str | None = None,
    name: str | None = None,
    progress: Callable[[int, int, int | None, int | None], object] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Extracts; the report as a dict (its ``failures`` as `fastwrite.Error`, ``stopped``: the
    exception that stopped the run, if one did). Raises `fastwrite.Error` if it cannot start."""

def list(
    archive: str | IO[bytes],
    *,
    label: str | None = None,
    name: str | None = None,
    **options: Any,
) -> tuple[
    builtins.list[
        tuple[
            str,
            str,
            int,
            int | None,
            float | None,
            str | None,
            str | None,
            str | None,
            tuple[int | None, int | None, str | None, str | None],
        ]
    ],
    tuple[Any, ...],
    tuple[str, ...],
]:
    """The entries (kind, name, size, mode, mtime, target, path, problem, (uid, gid, user,
    group)), the failures, and the warnings."""

def mirror(
    src: str,
    dst: str,
    *,
    progress: Callable[[int, int, int | None, int | None], object] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Mirrors; the report as a dict, as for `extract`."""

class Batch:
    """The engine's batch; `fastwrite.Batch` wraps it."""

    def __init__(
        self,
        root: str,
        *,
        overwrite: str = "refuse",
        close: str | int | None = None,
        fsync: bool = False,
        atomic: bool = False,
        writers: int | None = None,
    ) -> None: ...
    @property
    def root(self) -> str:
        """The folder the files go under."""
    @property
    def closed(self) -> bool:
        """Whether `finish` has run."""
    def write(
        self,
        path: str,
        data: bytes | bytearray,
        mode: int | None = None,
        mtime: float | None = None,
    ) -> None:
        """Hands a whole file to the batch's writers and returns."""
    def check(self, path: str) -> None:
        """Checks a path as `write` does, writing nothing."""
    def mkdir(self, path: str, mode: int | None = None, mtime: float | None = None) -> None:
        """Makes a directory now; its mode and mtime at the end."""
    def symlink(self, path: str, target: str) -> None:
        """A symlink, made at the end."""
    def take_errors(self) -> builtins.list[Any]:
        """The errors met out of sight so far."""
    def cancel(self) -> None:
        """Stops the batch."""
    def finish(self, *, cancel: bool = False, failed: bool = False) -> dict[str, Any]:
        """Waits for every write and close; the report as a dict, failures included. ``failed``:
        the program's work failed (an atomic batch is then not put in place)."""

def expand(given: builtins.list[str]) -> builtins.list[tuple[str, str]]:
    """The sources named (globs expanded), each as ``(name, identity)``."""

def destinations(
    sources: builtins.list[tuple[str, ...]], out: str, per_archive: bool
) -> builtins.list[str]:
    """Where each source would go; raises `fastwrite.Error` for two sharing a folder."""

def extract_many(
    sources: builtins.list[tuple[str, ...]],
    out: str,
    *,
    per_archive: bool = False,
    shard: tuple[int, int] | None = None,
    at_once: int | None = None,
    **options: Any,
) -> tuple[builtins.list[dict[str, Any]], BaseException | None]:
    """Extracts each source once; every source's row, and what stopped the run, if anything."""

def set_max_requests_per_second(per_second: int | None) -> None:
    """Caps this process's requests to object stores."""
