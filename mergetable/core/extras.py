"""Optional dependencies: importing one, or a typed error naming the extra that installs it.

``pip install mergetable`` has no Spark, S3 or dataframe library; the extras ``spark``, ``s3``, ``polars``,
``duckdb``, ``pandas`` and ``all`` add them.
"""

from __future__ import annotations

import importlib
import warnings
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


#: The start of the FutureWarning PySpark 4.3 gives at every session start when pandas 3 is installed.
PYSPARK_PANDAS_WARNING = "PySpark does not yet fully support pandas >= 3"


def quiet_pyspark_pandas_warning() -> None:
    """Ignore PySpark's FutureWarning about pandas 3, and no other warning.

    PySpark 4.3 checks the pandas version when it first imports ``pyspark.testing.utils``, which every
    ``SparkSession.builder.getOrCreate()`` does, and warns that pandas 3 is not fully supported, whether or
    not pandas is used. ``mergetable[all]`` installs pandas 3, and mergetable's Spark code uses Arrow, never
    pandas, so every session would start with a warning about nothing it does. The filter matches that
    message, the ``FutureWarning`` category and warnings attributed to PySpark's own modules only; importing
    :mod:`mergetable.spark` installs it.

    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     quiet_pyspark_pandas_warning()
    ...     warnings.warn_explicit(PYSPARK_PANDAS_WARNING + ".0", FutureWarning, "utils.py", 1, "pyspark.testing.utils")
    ...     warnings.warn_explicit(PYSPARK_PANDAS_WARNING + ".0", FutureWarning, "mine.py", 1, "mine")
    >>> [str(w.message) for w in caught]
    ['PySpark does not yet fully support pandas >= 3.0']
    """
    warnings.filterwarnings("ignore", message=PYSPARK_PANDAS_WARNING, category=FutureWarning, module=r"pyspark\.")
