"""Codes of the ``Type`` union and the enums of Arrow's format/Schema.fbs (as in arrow-rs 52)."""

from __future__ import annotations


class ArrowType:
    """Codes of the ``Type`` union (the ``type_type`` byte of a Field)."""

    NULL = 1
    INT = 2
    FLOATING_POINT = 3
    BINARY = 4
    UTF8 = 5
    BOOL = 6
    DECIMAL = 7
    DATE = 8
    TIME = 9
    TIMESTAMP = 10
    INTERVAL = 11
    LIST = 12
    STRUCT = 13
    UNION = 14
    FIXED_SIZE_BINARY = 15
    FIXED_SIZE_LIST = 16
    MAP = 17
    DURATION = 18
    LARGE_BINARY = 19
    LARGE_UTF8 = 20
    LARGE_LIST = 21
    RUN_END_ENCODED = 22
    BINARY_VIEW = 23
    UTF8_VIEW = 24
    LIST_VIEW = 25
    LARGE_LIST_VIEW = 26


# TimeUnit: SECOND, MILLISECOND, MICROSECOND, NANOSECOND
TIME_UNITS = ("s", "ms", "us", "ns")
MILLISECOND = 1
# DateUnit: DAY, MILLISECOND
DATE_DAY = 0
# Precision: HALF, SINGLE, DOUBLE
PRECISION_HALF, PRECISION_SINGLE, PRECISION_DOUBLE = 0, 1, 2
# IntervalUnit: YEAR_MONTH, DAY_TIME, MONTH_DAY_NANO
INTERVAL_YEAR_MONTH, INTERVAL_DAY_TIME, INTERVAL_MONTH_DAY_NANO = 0, 1, 2
# UnionMode: Sparse, Dense
UNION_SPARSE, UNION_DENSE = 0, 1
# Endianness: Little, Big
ENDIAN_LITTLE = 0
