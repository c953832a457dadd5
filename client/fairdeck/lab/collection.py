"""A collection: hands dealt, each verified and traced, appended batch by batch to a directory.

Invariants: record ``k`` of every file is hand ``k``. Nothing counts before it is on disk: after
each batch every file is fsynced, then ``state.json`` is replaced (write, fsync, rename); a
resumed collection first cuts the files back to the sizes it records, so a half-written batch is
dropped, never half kept. A hand is written only once its seed opens its commitment
(``hmac.compare_digest``) and the traced derivation gives exactly its cards; a live source adds
the log check at the end (``fairdeck.lab.live``). ``manifest.json`` (sizes, SHA-256, command,
version, dealer key) is written last. One process writes a directory at a time (``flock`` on
the directory itself, which no deleted file undoes), and only an empty directory or a collection's
own is collected into. The directory is not trusted: no link or special file in it is followed
or written through (``fairdeck.log.safefiles``), and its JSON is bounded before it is parsed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import platform
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from fairdeck.core.commitment import commit
from fairdeck.core.decks import DeckSpec
from fairdeck.core.errors import InvalidInput, VerificationError
from fairdeck.core.local import open_local, reveal_local
from fairdeck.core.seeds import normalize_client_seeds
from fairdeck.core.shuffle import shuffler
from fairdeck.core.strictjson import StrictJSONError, bounded_loads
from fairdeck.core.transcript import Transcript
from fairdeck.core.versions import CURRENT_VERSION
from fairdeck.lab import formats
from fairdeck.lab.trace import HandTrace, check_trace, trace
from fairdeck.log import safefiles

STATE = "state.json"
MANIFEST = "manifest.json"
LOCK = "collect.lock"
"""The lock file of an older fairdeck (the lock is now on the directory): allowed, never made."""
MAX_STATE_BYTES = 1 << 20
FORMAT = "fairdeck-lab-collection/1"


@cache
def _codes(deck: str) -> tuple[tuple[str, ...], dict[str, int]]:
    """The deck's card code of each id, and back (``Transcript.codes`` costs a lookup per card)."""
    spec = DeckSpec.parse(deck)
    by_id = [""] * (max(spec.card_ids) + 1)
    for card in spec.card_ids:
        by_id[card] = spec.card_for_id(card).code
    return tuple(by_id), {code: card for card, code in enumerate(by_id) if code}


def transcript_dict(t: Transcript) -> dict[str, Any]:
    """``t.to_dict()``, the spec's section 7 value, computed fast."""
    by_id, _ = _codes(t.deck)
    return {
        "version": t.version,
        "deck": t.deck,
        "hand_id": t.hand_id,
        "commitment": t.commitment.hex(),
        "server_seed": t.server_seed.hex(),
        "client_seeds": [seed.hex() for seed in t.client_seeds],
        "cards": [by_id[c] for c in t.cards],
    }


def transcript_from(value: dict[str, Any]) -> Transcript:
    """A transcript line of this collection back into a Transcript; VerificationError if it is not one."""
    try:
        _, by_code = _codes(value["deck"])
        return Transcript(
            version=value["version"],
            deck=value["deck"],
            hand_id=value["hand_id"],
            commitment=bytes.fromhex(value["commitment"]),
            server_seed=bytes.fromhex(value["server_seed"]),
            client_seeds=tuple(bytes.fromhex(seed) for seed in value["client_seeds"]),
            cards=tuple(by_code[code] for code in value["cards"]),
        )
    except (KeyError, TypeError, ValueError, InvalidInput) as e:
        raise VerificationError("malformed", f"a transcript line does not parse: {e!r}") from None


class CollectionError(Exception):
    """The directory cannot be collected into as asked; the message says why and what to do."""


class KeyMismatch(Exception):
    """A live dealer's signed checkpoint does not verify under the key given; ``dealt`` hands
    were dealt (and not collected) before that was known."""

    def __init__(self, detail: str, *, dealt: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.dealt = dealt


@dataclass(frozen=True)
class Dealt:
    """One hand as a source dealt it, closed: its transcript and, when live, its log indexes."""

    transcript: Transcript
    commit_index: int | None = None
    reveal_index: int | None = None


class Source(Protocol):
    """Where hands come from: the dealer in this process, or a live one."""

    description: str
    dealer_key: str | None
    """The log's verifier key (a live dealer), or None."""

    def deal(self, deck: str, count: int, client_seed: str, first: int) -> list[Dealt]:
        """Deal and close ``count`` hands with this client seed; ``first`` numbers them."""
        ...


@dataclass
class InProcess:
    """fairdeck's own dealing code in this process: seeds from the OS CSPRNG, as the dealer draws them."""

    run: str
    description: str = "in-process (fairdeck.core.local, seeds from secrets.token_bytes)"
    dealer_key: str | None = None
    entropy: Callable[[int], bytes] = secrets.token_bytes

    def deal(self, deck: str, count: int, client_seed: str, first: int) -> list[Dealt]:
        return [
            Dealt(reveal_local(open_local(deck, f"lab-{self.run}-{i}", entropy=self.entropy), [client_seed]))
            for i in range(first, first + count)
        ]


def verify_dealt(t: Transcript) -> HandTrace:
    """The hand's trace, after checking its seed opens its commitment and derives its cards."""
    try:
        expected = commit(t.deck, t.hand_id, t.server_seed, version=t.version)
        if not hmac.compare_digest(expected, t.commitment):
            raise VerificationError("commitment", f"hand {t.hand_id}: the seed does not open the commitment")
        traced = trace(t.deck, t.hand_id, t.server_seed, t.client_seeds, version=t.version)
    except InvalidInput as e:
        raise VerificationError("malformed", f"hand {t.hand_id}: {e}") from None
    check_trace(traced, t.cards, t.hand_id)
    return traced


def check_asked(dealt: Sequence[Dealt], deck: str, client_seed: str, version: str) -> None:
    """Raise VerificationError unless every hand is one this batch asked for: this deck and
    version, dealt with this batch's client seed (unique to the run and the batch), each once.
    A hand can verify on its own (seed, commitment, cards) and still be another: of another deck
    (written in the wrong record size), of the dealer's own choosing, or repeated."""
    wanted = normalize_client_seeds([client_seed])
    seen: set[str] = set()
    for d in dealt:
        t = d.transcript
        if t.version != version:
            raise VerificationError("version", f"hand {t.hand_id} was dealt with {t.version}, not {version}")
        if t.deck != deck:
            raise VerificationError(
                "deck", f"hand {t.hand_id} is a {t.deck} deck; the collection asked for {deck}"
            )
        if t.client_seeds != wanted:
            raise VerificationError(
                "client seeds",
                f"hand {t.hand_id} was not dealt with this batch's client seed ({client_seed})",
            )
        if t.hand_id in seen:
            raise VerificationError("hand id", f"hand {t.hand_id} came back twice in one batch")
        seen.add(t.hand_id)


@dataclass
class CollectionPlan:
    """What to collect; the parameters a resumed collection must share."""

    deck: str
    raw_bytes: int
    source: str
    run: str = field(default_factory=lambda: secrets.token_hex(4))
    batch: int = 2_000

    def same_as(self, state: dict[str, Any]) -> str | None:
        """Why a saved state belongs to another collection, or None."""
        for name in ("deck", "source"):
            if state.get(name) != getattr(self, name):
                return f"{name} {state.get(name)!r} (this command asks for {getattr(self, name)!r})"
        return None


Progress = Callable[[int, int], None]
"""Called after each batch with (hands so far, raw bytes so far)."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(out: Path, name: str, value: object) -> None:
    """Replace ``out/name`` atomically and durably (never through a link planted there)."""
    safefiles.write_replacing(out, name, (json.dumps(value, indent=2) + "\n").encode())


_held: dict[Path, tuple[int, int]] = {}
"""The collection locks this process holds: directory -> (fd, depth)."""


@contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold the directory's lock (``flock`` on the directory itself: deleting a file does not
    free it; the kernel drops it when the process ends, however it ends). Re-entrant within a
    process; another process is refused."""
    key = out.resolve()
    if key in _held:
        fd, depth = _held[key]
        _held[key] = (fd, depth + 1)
    else:
        try:
            fd = safefiles.lock_directory(out)
        except safefiles.DirectoryBusy:
            raise CollectionError(
                f"another `fairdeck lab collect` is writing {out}; wait for it to end (then run this "
                "command again to resume), or collect into another directory"
            ) from None
        _held[key] = (fd, 1)
    try:
        yield
    finally:
        fd, depth = _held.pop(key)
        if depth > 1:
            _held[key] = (fd, depth - 1)
        else:
            os.close(fd)


def check_directory(out: Path) -> None:
    """Refuse a path that is not a directory, or a directory that holds anything but a
    collection (or the empty start of one): a collection is not scattered among other files."""
    if out.exists() and not out.is_dir():
        raise CollectionError(f"{out} exists and is not a directory: give --out a new or empty directory")
    if not out.exists() or os.path.lexists(out / STATE):
        return
    ours = {name.split("/")[0] for name in formats.APPENDED} | {LOCK, STATE + ".tmp", "log"}
    own_files = set(formats.APPENDED)
    for path in out.rglob("*"):
        name = path.relative_to(out).as_posix()
        if name.split("/")[0] not in ours or (path.is_file() and name not in own_files | ours):
            raise CollectionError(
                f"{out} holds {name} and no {STATE}: it is not a collection; collect into a new or "
                "empty directory"
            )


def read_state(out: Path) -> dict[str, Any] | None:
    path = out / STATE
    if safefiles.lstat(out, STATE) is None:
        return None
    try:
        state = bounded_loads(safefiles.read_bytes(out, STATE, max_bytes=MAX_STATE_BYTES), what=str(path))
    except safefiles.UnsafeFile as e:
        raise CollectionError(f"{e}; collect into a new directory") from None
    except (OSError, StrictJSONError) as e:
        raise CollectionError(f"{path} cannot be read ({e}); collect into a new directory") from None
    if not isinstance(state, dict) or not _whole_state(state):
        raise CollectionError(
            f"{path} is not a fairdeck lab collection's state; collect into a new directory"
        )
    return state


def _whole_state(state: object) -> bool:
    """The fields ``_collect`` reads, of the types it reads them as."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        return False
    ints = all(type(state.get(k)) is int and state[k] >= 0 for k in ("hands", "batches"))
    text = all(isinstance(state.get(k), str) for k in ("deck", "source", "run", "version", "started"))
    sizes = state.get("sizes")
    whole_sizes = sizes is None or (
        isinstance(sizes, dict) and all(type(sizes.get(n)) is int and sizes[n] >= 0 for n in formats.APPENDED)
    )
    return ints and text and whole_sizes and isinstance(state.get("seconds"), int | float)


class CollectionFiles:
    """The appended files of one collection, cut back to a saved state when resumed."""

    def __init__(self, out: Path, sizes: dict[str, int] | None) -> None:
        self.out = out
        self.files: dict[str, BinaryIO] = {}
        try:
            for name in formats.APPENDED:
                self.files[name] = self._open(name, None if sizes is None else sizes[name])
        except BaseException:
            self.close()
            raise

    def _open(self, name: str, size: int | None) -> BinaryIO:
        """The file to append to, a regular file of this collection (never a link's target)."""
        path = self.out / name
        flags = os.O_RDWR | (os.O_CREAT if size is None else 0)
        try:
            handle = os.fdopen(safefiles.open_file(self.out, name, flags), "r+b")
        except safefiles.UnsafeFile as e:
            raise CollectionError(f"{e}: the collection is damaged; collect into a new directory") from None
        except FileNotFoundError:
            handle = None
        length = -1 if handle is None else os.fstat(handle.fileno()).st_size
        if size is None and length:
            assert handle is not None
            handle.close()
            raise CollectionError(f"{path} exists with no state.json: collect into a new directory")
        if size is not None and length < size:
            if handle is not None:
                handle.close()
            raise CollectionError(
                f"{path} is shorter than {STATE} records: the collection is damaged; "
                "collect into a new directory"
            )
        assert handle is not None
        handle.truncate(size or 0)  # drop a batch that was being written when it stopped
        handle.seek(size or 0)
        return handle

    def append(self, hands: Sequence[tuple[Dealt, HandTrace]], layout: formats.Layout) -> None:
        f = self.files
        for dealt, t in hands:
            tr = dealt.transcript
            f[formats.RAW].write(t.blocks)
            f[formats.SEEDS].write(tr.server_seed)
            f[formats.INDEX].write(t.index.to_bytes(layout.index_bytes, "big"))
            f[formats.CHOICES].write(layout.cards_of(t.choices))
            f[formats.ATTEMPTS].write(min(t.attempts, 255).to_bytes(1, "big"))
            f[formats.DECKS].write(layout.cards_of(tr.cards))
            line: dict[str, Any] = {"transcript": transcript_dict(tr)}
            if dealt.commit_index is not None:
                line["log"] = {"commit": dealt.commit_index, "reveal": dealt.reveal_index}
            f[formats.TRANSCRIPTS].write((json.dumps(line, separators=(",", ":")) + "\n").encode())

    def sync(self) -> dict[str, int]:
        """Flush and fsync every file; their sizes."""
        sizes = {}
        for name, handle in self.files.items():
            handle.flush()
            os.fsync(handle.fileno())
            sizes[name] = handle.tell()
        return sizes

    def close(self) -> None:
        for handle in self.files.values():
            handle.close()


def collect(
    out: Path,
    source: Source,
    plan: CollectionPlan,
    *,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """Collect until ``raw/stream.bin`` holds ``plan.raw_bytes`` (whole hands); the final state.

    Resumes when ``out`` holds a state of the same deck and source. ``should_stop`` is polled
    between batches (Ctrl-C): the state then stays resumable.
    """
    check_directory(out)
    out.mkdir(parents=True, exist_ok=True)
    with locked(out):
        return _collect(out, source, plan, progress=progress, should_stop=should_stop)


def _collect(
    out: Path,
    source: Source,
    plan: CollectionPlan,
    *,
    progress: Progress | None,
    should_stop: Callable[[], bool],
) -> dict[str, Any]:
    state = read_state(out)
    if state is not None:
        why = plan.same_as(state)
        if why is not None:
            raise CollectionError(
                f"{out / STATE} is a collection of another {why}; collect into a new directory"
            )
        if state.get("version") != CURRENT_VERSION:
            raise CollectionError(
                f"{out / STATE} is a collection of {state.get('version')!r} hands and this fairdeck deals "
                f"{CURRENT_VERSION!r}; collect into a new directory"
            )
        plan.run = state["run"]
    else:
        state = {
            "format": FORMAT,
            "deck": plan.deck,
            "source": plan.source,
            "run": plan.run,
            "version": CURRENT_VERSION,
            "hands": 0,
            "batches": 0,
            "sizes": None,
            "seconds": 0.0,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    spec = DeckSpec.parse(plan.deck)
    layout = formats.Layout(spec.size, shuffler(spec.size).width)
    writer = CollectionFiles(out, state["sizes"])
    try:
        if state["sizes"] is None:
            state["sizes"] = writer.sync()
            write_json(out, STATE, state)
        if state["sizes"][formats.RAW] < plan.raw_bytes and os.path.lexists(out / MANIFEST):
            # Extending a finished collection: its manifest no longer describes the files.
            (out / MANIFEST).unlink()
            _fsync_dir(out)
        while state["sizes"][formats.RAW] < plan.raw_bytes and not should_stop():
            began = time.perf_counter()
            batch = state["batches"]
            client_seed = f"fairdeck-lab:{plan.run}:{batch}"
            dealt = source.deal(plan.deck, plan.batch, client_seed, state["hands"])
            if len(dealt) != plan.batch:
                raise VerificationError(
                    "hands", f"the dealer returned {len(dealt)} hands, asked for {plan.batch}"
                )
            check_asked(dealt, plan.deck, client_seed, state["version"])
            writer.append([(d, verify_dealt(d.transcript)) for d in dealt], layout)
            state["sizes"] = writer.sync()
            state["hands"] += len(dealt)
            state["batches"] = batch + 1
            state["seconds"] = round(state["seconds"] + time.perf_counter() - began, 3)
            write_json(out, STATE, state)
            if progress is not None:
                progress(state["hands"], state["sizes"][formats.RAW])
    finally:
        writer.close()
    return state


def sha256_file(path: Path) -> str:
    """SHA-256 of a file of ours (the package's own code)."""
    with path.open("rb") as f:
        return sha256_of(f)


def sha256_of(f: BinaryIO, limit: int | None = None) -> str:
    """SHA-256 of what ``f`` holds from where it is, reading at most ``limit`` bytes."""
    h = hashlib.sha256()
    left = -1 if limit is None else limit
    while left and (chunk := f.read(1 << 20 if left < 0 else min(1 << 20, left))):
        h.update(chunk)
        left = left - len(chunk) if left > 0 else left
    return h.hexdigest()


def version() -> str:
    try:
        return metadata.version("fairdeck")
    except metadata.PackageNotFoundError:
        return "unknown"


def code_digest() -> str:
    """SHA-256 of the fairdeck package's files as ``sha256sum`` lists them, sorted by path: what
    ``find -L fairdeck -type f ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0
    sha256sum | sha256sum`` prints in the package's parent directory (client/ of the source)."""
    package = Path(__file__).parent.parent
    files = sorted(
        (p for p in package.rglob("*") if "__pycache__" not in p.parts and p.is_file()),
        key=lambda p: p.relative_to(package.parent).as_posix().encode(),
    )
    listing = "".join(f"{sha256_file(p)}  {p.relative_to(package.parent).as_posix()}\n" for p in files)
    return hashlib.sha256(listing.encode()).hexdigest()


def finish(
    out: Path,
    state: dict[str, Any],
    *,
    argv: Sequence[str],
    source: Source,
    log_check: dict[str, Any] | None,
    nist_bits: int = formats.NIST_BITS,
) -> dict[str, Any]:
    """Write the NIST ASCII files and ``manifest.json``; the manifest."""
    with locked(out):
        return _finish(out, state, argv=argv, source=source, log_check=log_check, nist_bits=nist_bits)


def _finish(
    out: Path,
    state: dict[str, Any],
    *,
    argv: Sequence[str],
    source: Source,
    log_check: dict[str, Any] | None,
    nist_bits: int,
) -> dict[str, Any]:
    for binary, text in ((formats.RAW, formats.RAW_NIST), (formats.SEEDS, formats.SEEDS_NIST)):
        with (
            os.fdopen(safefiles.open_file(out, binary), "rb") as src,
            safefiles.replacing(out, text) as target,
        ):
            formats.ascii_bits(src, target, nist_bits)
    spec = DeckSpec.parse(state["deck"])
    layout = formats.Layout(spec.size, shuffler(spec.size).width)
    described = formats.describe(layout)
    files = []
    for name in formats.BOUND:
        with os.fdopen(safefiles.open_file(out, name), "rb") as f:
            files.append(
                {
                    "path": name,
                    "bytes": os.fstat(f.fileno()).st_size,
                    "sha256": sha256_of(f),
                    "holds": described[name],
                }
            )
    manifest = {
        "format": FORMAT,
        "command": ["fairdeck", *argv],
        "fairdeck": version(),
        "fairdeck code (SHA-256)": code_digest(),
        "algorithm": state["version"],
        "deck": state["deck"],
        "hands": state["hands"],
        "source": source.description,
        "dealer_key": source.dealer_key,
        "log_check": log_check,
        "started (UTC)": state["started"],
        "finished (UTC)": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds collecting": state["seconds"],
        "machine": f"{platform.platform()}; {os.cpu_count()} CPUs",
        "files": files,
    }
    write_json(out, MANIFEST, manifest)
    return manifest
