"""Optional dependencies: importing one, or a typed error naming the extra that installs it.

``pip install mergetable`` has no Spark, S3 or dataframe library; the extras ``spark``, ``s3``, ``polars``,
``duckdb``, ``pandas`` and ``all`` add them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mergetable.core.errors import MissingExtraError

EXTRAS = {"pyspark": "spark", "s3fs": "s3", "polars": "polars", "duckdb": "duckdb", "pandas": "pandas"}


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``, or raise :class:`MissingExtraError` naming the extra to install.

    >>> require("pyarrow", "reading").__name__
    'pyarrow'
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.partition(".")[0]
        raise MissingExtraError(feature, top, EXTRAS.get(top)) from None
