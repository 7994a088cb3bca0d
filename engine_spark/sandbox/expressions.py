"""Expression classes a query's plans may contain (reviewed allow-list; no pyspark).

Generated once from Spark 4.3 by analyzing the documented examples of every function in
``rules.ALLOWED_FUNCTIONS`` and ``CLOCK_FUNCTIONS`` plus the sandbox's own table of
legitimate queries, then reviewed: operators, literals, casts, subqueries, windows,
aggregates, lambdas and the classes behind allowed functions. Not here (so refused): the
classes behind refused functions (``CallMethodViaReflection``, ``Rand``, ``Uuid``,
``InputFileName``, ``SparkPartitionID``, ``CurrentUser``...), UDFs of any kind, and any class a
newer Spark adds, until reviewed. ``tests/integration/engine/test_sandbox.py`` checks that the
examples of allowed functions still analyze into listed classes.

Names are relative to ``org.apache.spark.sql.catalyst.``; Scala objects end in ``$``.
"""

from __future__ import annotations


def _names(*lines: str) -> frozenset[str]:
    return frozenset(name for line in lines for name in line.split())


def _qualified(*groups: tuple[str, frozenset[str]]) -> frozenset[str]:
    return frozenset(f"{package}.{name}" for package, names in groups for name in names)


CLOCK_EXPRESSIONS: frozenset[str] = frozenset(
    {
        "expressions.CurrentDate",
        "expressions.CurrentTime",
        "expressions.CurrentTimeZone",
        "expressions.CurrentTimestamp",
        "expressions.LocalTimestamp",
        "expressions.Now",
    }
)
"""The current date, time and time zone: refused in transforms, allowed interactively."""

ALLOWED_EXPRESSIONS: frozenset[str] = _qualified(
    (
        "analysis",
        _names(
            "MultiAlias UnresolvedAlias UnresolvedAttribute UnresolvedExtractValue",
            "UnresolvedFunction UnresolvedGenerator UnresolvedOrdinal UnresolvedRegex",
            "UnresolvedStar UnresolvedStarExceptOrReplace",  # SELECT * EXCEPT (c): a leaf;
            # what it expands to is vetted in the analyzed plan
        ),
    ),
    (
        "expressions",
        _names(
            "Abs Acos Acosh Add AddMonths AesDecrypt Alias And ApproxTopKEstimate ArrayAggregate",
            "ArrayAppend ArrayCompact ArrayContains ArrayDistinct ArrayExcept ArrayExists",
            "ArrayFilter ArrayForAll ArrayInsert ArrayIntersect ArrayJoin ArrayMax ArrayMin",
            "ArrayPosition ArrayPrepend ArrayRemove ArrayRepeat ArraySize ArraySort",
            "ArrayTransform ArrayUnion ArraysOverlap ArraysZip Ascii Asin Asinh AssertTrue Atan",
            "Atan2 Atanh AttributeReference BRound Base32 Base64 Between Bin BinaryPad",
            "BinaryPredicate BitLength BitmapAndAgg BitmapBitPosition BitmapBucketNumber",
            "BitmapConstructAgg BitmapCount BitmapOrAgg BitwiseAnd BitwiseCount BitwiseGet",
            "BitwiseNot BitwiseOr BitwiseXor CaseWhen Cast Cbrt Ceil Chr Coalesce Collate",
            "Collation Concat ConcatWs Contains Conv ConvertTimezone Cos Cosh Cot CounterDiff",
            "CounterDiffWithStartTime Crc32 CreateArray CreateMap CreateNamedStruct Csc",
            "CsvToStructs Cube CumeDist CurrentRow$ DateAdd DateDiff DateFormatClass",
            "DateFromUnixDate DateSub DatetimeSub DayName DayOfMonth DayOfWeek DayOfYear Decode",
            "DenseRank",
            "Divide ElementAt Elt Encode EndsWith EqualNull EqualNullSafe EqualTo EulerNumber",
            "Exists Exp Explode Expm1 Extract ExtractValue Factorial FindInSet Flatten Floor",
            "FormatNumber FormatString FromUTCTimestamp FromUnixTime Get GetArrayItem",
            "GetArrayStructFields GetJsonObject GetMapValue GetStructField GreaterThan",
            "GreaterThanOrEqual Greatest Grouping GroupingID GroupingSets Hex HllSketchEstimate",
            "HllUnion Hmac Hour Hypot ILike If In InSubquery InitCap Inline IntegralDivide IsNaN",
            "IsNotNull IsNull IsValidUTF8 JaroWinkler JsonObjectKeys JsonToStructs JsonTuple",
            "KllSketchGetNBigint KllSketchGetNDouble KllSketchGetNFloat",
            "KllSketchGetQuantileBigint KllSketchGetQuantileDouble KllSketchGetQuantileFloat",
            "KllSketchGetRankBigint KllSketchGetRankDouble KllSketchGetRankFloat",
            "KllSketchMergeBigint KllSketchMergeDouble KllSketchMergeFloat",
            "KllSketchToStringBigint KllSketchToStringDouble KllSketchToStringFloat KnownNotNull",
            "KnownNullable Lag LambdaFunction LastDay LateralSubquery Lead Least Left Length",
            "LengthOfJsonArray LessThan LessThanOrEqual Levenshtein Like LikeAny ListQuery",
            "Literal Log Log10 Log1p Log2 Logarithm Lower Luhncheck MakeDTInterval MakeDate",
            "MakeInterval MakeTimestamp MakeTimestampFromDateTime MakeTimestampNTZ MakeValidUTF8",
            "MakeYMInterval MapConcat MapContainsKey MapEntries MapFilter MapFromArrays",
            "MapFromEntries MapKeys MapValues MapZipWith Mask Md5 MicrosToTimestamp",
            "MillisToTimestamp Minute Month MonthName MonthsBetween Multiply",
            "Murmur3Hash NTile NaNvl NamedArgumentExpression NamedLambdaVariable NanosToTimestamp",
            "NextDay Not NthValue NullIf NullIfZero Nvl Nvl2 OctetLength Or OuterReference",
            "Overlay ParseToDate ParseToTimestamp ParseUrl PercentRank Pi PipeExpression Pmod",
            "PosExplode Pow PreciseTimestampConversion Quarter Quote RLike RaiseError Rank",
            "RegExpCount RegExpExtract RegExpExtractAll RegExpInStr RegExpReplace RegExpSubStr",
            "Remainder ResolvedCollation Reverse Right Rint Rollup Round RoundCeil RoundFloor",
            "RowNumber ScalarSubquery SchemaOfCsv SchemaOfJson Sec Second SecondsToTimestamp",
            "Sentences Sequence Sha1 Sha2 ShiftLeft ShiftRight ShiftRightUnsigned Signum Sin Sinh",
            "Size Slice SortArray SortOrder SoundEx SpecifiedWindowFrame SplitPart Sqrt Stack",
            "StartsWith StringInstr StringInstrWithOccurrence StringLPad StringLocate StringRPad",
            "StringRepeat StringReplace StringSpace StringSplit StringToMap StringTranslate",
            "StringTrim StringTrimBoth StringTrimLeft StringTrimRight StructsToCsv StructsToJson",
            "StructsToXml Substring SubstringIndex Subtract Tan Tanh ThetaDifference",
            "ThetaIntersection ThetaSketchEstimate ThetaUnion TimeBucket TimestampAdd",
            "TimestampAddInterval ToBinary ToCharacter ToDegrees ToNumber ToRadians",
            "ToUTCTimestamp ToUnixTimestamp TransformKeys TransformValues TruncDate",
            "TruncTimestamp TryAdd TryAesDecrypt TryDivide TryElementAt TryEval TryMakeInterval",
            "TryMakeTimestamp TryMakeTimestampFromDateTime TryMod TryMultiply TryParseUrl",
            "TrySubtract TryToBinary TryToNumber TryUrlDecode TryValidateUTF8",
            "TupleDifferenceDouble TupleDifferenceInteger TupleDifferenceThetaDouble",
            "TupleDifferenceThetaInteger TupleIntersectionDouble TupleIntersectionInteger",
            "TupleIntersectionThetaDouble TupleIntersectionThetaInteger TupleSketchEstimateDouble",
            "TupleSketchEstimateInteger TupleSketchSummaryDouble TupleSketchSummaryInteger",
            "TupleSketchThetaDouble TupleSketchThetaInteger TupleUnionDouble TupleUnionInteger",
            "TupleUnionThetaDouble TupleUnionThetaInteger TypeOf UnBase32 UnBase64 UnaryMinus",
            "UnaryPositive UnboundedFollowing$ UnboundedPreceding$ Unhex UnixDate UnixMicros",
            "UnixMillis UnixSeconds UnixTimestamp UnresolvedCollation",
            "UnresolvedNamedLambdaVariable UnresolvedWindowExpression UnspecifiedFrame$ Upper",
            "UrlDecode UrlEncode ValidateUTF8 VectorAvg VectorCosineSimilarity VectorInnerProduct",
            "VectorL2Distance VectorNorm VectorNormalize VectorSum WeekDay WeekOfYear WidthBucket",
            "WindowExpression WindowSpecDefinition XxHash64 Year ZeroIfNull ZipWith",
        ),
    ),
    (
        "expressions.aggregate",
        _names(
            "AggregateExpression AnyValue ApproxTopK ApproxTopKAccumulate ApproxTopKCombine",
            "ApproximatePercentile Average BitAndAgg BitOrAgg BitXorAgg BoolAnd BoolOr",
            "CollectList CollectSet CollectUnion Corr Count CountIf CountMinSketchAgg",
            "CovPopulation CovSample First HistogramNumeric HllSketchAgg HllUnionAgg",
            "HyperLogLogPlusPlus KllMergeAggBigint KllMergeAggDouble KllMergeAggFloat",
            "KllSketchAggBigint KllSketchAggDouble KllSketchAggFloat Kurtosis Last ListAgg Max",
            "MaxBy MaxMinByK Median Min MinBy Mode Percentile PercentileCont PercentileDisc",
            "PivotFirst RegrAvgX RegrAvgY RegrCount RegrIntercept RegrR2 RegrSXX RegrSXY RegrSYY",
            "RegrSlope Skewness StddevPop StddevSamp Sum ThetaIntersectionAgg ThetaSketchAgg",
            "ThetaUnionAgg TupleIntersectionAggDouble TupleIntersectionAggInteger",
            "TupleSketchAggDouble TupleSketchAggInteger TupleUnionAggDouble TupleUnionAggInteger",
            "VariancePop VarianceSamp",
        ),
    ),
    (
        "expressions.st",
        _names(
            "ST_AsBinary ST_GeogFromWKB ST_GeomFromWKB ST_SetSrid ST_Srid",
        ),
    ),
    (
        "expressions.variant",
        _names(
            "IsValidVariant IsVariantNull ParseJson SchemaOfVariant SchemaOfVariantAgg",
            "ToVariantObject VariantArrayAppend VariantDelete VariantGet VariantInsert VariantSet",
            "VariantStripNulls",
        ),
    ),
)
