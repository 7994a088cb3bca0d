"""Whether a new query's output schema may follow the old one (ODF "Schema Evolution").

Existing columns must stay, with the same name, type and position; new columns may only be
appended. Nullability is not compared (the coordinator ignores it too).
"""

from __future__ import annotations

import pyarrow as pa

from engine_spark.errors import InvalidQueryError


def check_schema_evolution(old: pa.Schema, new: pa.Schema) -> None:
    """Raise InvalidQueryError naming the first column the new schema breaks."""
    for position, old_field in enumerate(old):
        if position >= len(new):
            raise InvalidQueryError(
                f"the new query drops column {old_field.name!r}; existing columns must be kept "
                "(only adding columns at the end is allowed)"
            )
        new_field = new.field(position)
        if new_field.name != old_field.name:
            raise InvalidQueryError(
                f"the new query has column {new_field.name!r} at position {position} where "
                f"{old_field.name!r} was; existing columns must keep their names and order"
            )
        if not new_field.type.equals(old_field.type):
            raise InvalidQueryError(
                f"the new query changes the type of column {old_field.name!r} from "
                f"{old_field.type} to {new_field.type}"
            )
