"""What the driver does before any task of a read, for the format and for ``read()`` alike:
:func:`kafka_tiered_source.planning.checked.plan_checked` (plan, budget check, storage check),
which ``scan()`` runs too.  No pyspark import: ``read()`` runs on Spark 3.4/3.5, which has no
``pyspark.sql.datasource``."""
from __future__ import annotations

from ..planning.checked import plan_checked

__all__ = ["plan_checked"]
