"""What a Spark user reads first when the data source refuses something.

PySpark 4.3 reports an exception raised in a Python data source as ``[PYTHON_DATA_SOURCE_ERROR] Failed to
<action>: `` followed by the worker's formatted traceback, the exception's own sentence last. Neither the error
class nor that prefix can be chosen by the data source: the JVM wraps whatever the worker sends, whatever the
exception's type (a ``PySparkException`` subclass gets no other treatment). What the data source can shape is the
traceback: :func:`concise_errors` raises a :class:`~mergetable.core.errors.MergeTableError` (a sentence meant
for the user, naming the option, column or file) again without the frames of mergetable's own code, so with
PySpark's default ``spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled=true`` (which drops PySpark's
frames) the sentence is the fourth line of the message rather than the last of a long traceback. With
``spark.sql.execution.pyspark.udf.hideTraceback.enabled=true`` PySpark sends no traceback at all and the
sentence is on the first line. Any other exception (a bug) keeps its whole traceback.

A catalog table (``CREATE TABLE t (...) USING mergetable``, ``saveAsTable``) reaches the data source with no
``path`` option at all: PySpark 4.3 hands a Python data source of a catalog table only the table's properties.
:func:`require_location` turns that into an error that says so and points to ``register_view``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import ParamSpec, TypeVar

from mergetable.core.errors import MergeTableError, OptionsError

P = ParamSpec("P")
R = TypeVar("R")

CATALOG_TABLE_HINT = (
    "no table location. A mergetable table is addressed by its location: spark.read.format('mergetable')"
    ".load(uri), df.write.format('mergetable').save(uri). Catalog tables (CREATE TABLE ... USING mergetable, "
    "saveAsTable, spark.table) cannot work: PySpark hands a Python data source of a catalog table no "
    "options, so it could never be read or written. For SQL, register a view over the location with "
    "mergetable.spark.register_view(spark, name, uri)"
)


def concise_errors(method: Callable[P, R]) -> Callable[P, R]:
    """``method``, raising a :class:`MergeTableError` again without mergetable's frames (see the module).

    >>> import traceback
    >>> @concise_errors
    ... def plan() -> None:
    ...     raise OptionsError("bucket", "must be positive")
    >>> try:
    ...     plan()
    ... except OptionsError as exc:
    ...     print(traceback.extract_tb(exc.__traceback__)[-1].name, exc)  # not "plan"
    wrapper option 'bucket': must be positive
    """

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except MergeTableError as exc:
            raise exc.with_traceback(None) from None

    return wrapper


def require_location(options: Mapping[str, str]) -> None:
    """Refuse a call without a ``path`` option (a catalog table's) with :data:`CATALOG_TABLE_HINT`.

    >>> require_location({"path": "/tmp/t"})
    >>> require_location({"provider": "mergetable"})
    Traceback (most recent call last):
    ...
    mergetable.core.errors.OptionsError: option 'path': no table location. A mergetable table is addressed ...
    """
    if not str(options.get("path") or "").strip():
        raise OptionsError("path", CATALOG_TABLE_HINT)


__all__ = ["CATALOG_TABLE_HINT", "concise_errors", "require_location"]
