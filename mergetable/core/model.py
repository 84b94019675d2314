"""Base classes of every persisted metadata model: frozen pydantic, camelCase JSON like Paimon's."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from mergetable.core.errors import CorruptMetadataError, UnsupportedError

FORMAT_VERSION = 2
"""The table format version (spec/format.md) that this code writes and the newest one it reads."""


class JsonModel(BaseModel):
    """Frozen model dumped with camelCase aliases and without null fields."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, alias_generator=to_camel, extra="ignore")

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def from_json(cls, text: str | bytes, path: str = "<memory>") -> Self:
        """Parse JSON text, raising :class:`CorruptMetadataError` naming ``path`` on any defect."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "document"
            raise CorruptMetadataError(path, f"invalid {cls.__name__} JSON at {where}: {first['msg']}") from None


class Versioned(JsonModel):
    """A document carrying the format version; one newer than :data:`FORMAT_VERSION` is refused."""

    version: int = FORMAT_VERSION

    @classmethod
    def from_json(cls, text: str | bytes, path: str = "<memory>") -> Self:
        doc = super().from_json(text, path)
        if doc.version > FORMAT_VERSION:
            raise UnsupportedError(
                f"{path}: format version {doc.version} is newer than this mergetable reads ({FORMAT_VERSION}); "
                "upgrade mergetable to read this table"
            )
        return doc
