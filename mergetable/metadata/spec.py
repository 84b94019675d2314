"""JSON Schema of every persisted model, published in ``spec/schemas``.

``python -m mergetable.metadata.spec spec/schemas`` regenerates the files; a test fails when the
committed files (or the prose in ``spec/format.md``) drift from the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mergetable.core.model import JsonModel
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import MODELS

PERSISTED: tuple[type[JsonModel], ...] = (TableSchema, *MODELS)


def json_schemas() -> dict[str, dict[str, Any]]:
    """File name → JSON Schema (by alias, as written on disk)."""
    return {f"{m.__name__}.json": m.model_json_schema(by_alias=True, mode="serialization") for m in PERSISTED}


def field_names(model: type[JsonModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "spec/schemas")
    out.mkdir(parents=True, exist_ok=True)
    for name, schema in json_schemas().items():
        (out / name).write_text(render(schema))
    print(f"wrote {len(PERSISTED)} schemas to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
