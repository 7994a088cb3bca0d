"""The sandbox's reviewed allow-lists: what a query may contain (data only, no pyspark).

Every transform query is untrusted input: a dataset pulled from someone else carries SQL that
``odf pull`` and ``odf verify`` replay here. ``engine_spark.sandbox`` walks Spark's parsed and
analyzed plans and accepts only what these tables name. Anything they do not name (a plan node,
an expression class or a function that a newer Spark adds) is refused until reviewed and added
here. ``tests/integration/engine/test_sandbox.py`` lists the functions of Spark's registry
that are in neither ``ALLOWED_FUNCTIONS`` nor ``REFUSED_FUNCTIONS``/``CLOCK_FUNCTIONS``.

Class names are relative to ``org.apache.spark.sql.catalyst.`` when they live there.
"""

from __future__ import annotations


def _names(*lines: str) -> frozenset[str]:
    return frozenset(name for line in lines for name in line.split())


# --- Why a function is refused -------------------------------------------------------------

_JAVA = "calls arbitrary Java methods"
_RANDOM = "is random"
_RANDOM_IV = "encrypts with a random initialization vector"
_CLOCK = "depends on the wall clock"
_ENVIRONMENT = "depends on the environment (user, catalog, engine version)"
_FILES = "depends on file paths"
_PARTITIONS = "depends on how Spark partitions the data"
_MODULE = "needs a Spark module the engine does not ship"
_PROTOBUF = "reads descriptor files"
_XML = "parses XML with a parser the sandbox has not vetted (external entities)"

NONDETERMINISTIC_REASONS = frozenset({_RANDOM, _RANDOM_IV, _CLOCK, _PARTITIONS})
"""Reasons that are about reproducibility only: an interactive query (``odf sql``) may use
clock functions; a transform may not."""

CLOCK_FUNCTIONS: dict[str, str] = dict.fromkeys(
    (
        "current_date",
        "curdate",
        "current_time",
        "current_timestamp",
        "now",
        "localtimestamp",
        "localtime",
        "current_timezone",
    ),
    _CLOCK,
)
"""Refused in transforms (a replay would differ), allowed in interactive queries."""

REFUSED_FUNCTIONS: dict[str, str] = {
    "current_catalog": _ENVIRONMENT,
    "current_database": _ENVIRONMENT,
    "current_path": _ENVIRONMENT,
    "current_schema": _ENVIRONMENT,
    "current_user": _ENVIRONMENT,
    "session_user": _ENVIRONMENT,
    "user": _ENVIRONMENT,
    "version": _ENVIRONMENT,
    "input_file_block_length": _FILES,
    "input_file_block_start": _FILES,
    "input_file_name": _FILES,
    "java_method": _JAVA,
    "reflect": _JAVA,
    "try_reflect": _JAVA,
    "from_avro": _MODULE,
    "schema_of_avro": _MODULE,
    "to_avro": _MODULE,
    "monotonically_increasing_id": _PARTITIONS,
    "spark_partition_id": _PARTITIONS,
    "from_protobuf": _PROTOBUF,
    "to_protobuf": _PROTOBUF,
    "rand": _RANDOM,
    "randn": _RANDOM,
    "random": _RANDOM,
    "randstr": _RANDOM,
    "shuffle": _RANDOM,
    "uniform": _RANDOM,
    "uuid": _RANDOM,
    "aes_encrypt": _RANDOM_IV,
    "from_xml": _XML,
    "schema_of_xml": _XML,
    "xpath": _XML,
    "xpath_boolean": _XML,
    "xpath_double": _XML,
    "xpath_float": _XML,
    "xpath_int": _XML,
    "xpath_long": _XML,
    "xpath_number": _XML,
    "xpath_short": _XML,
    "xpath_string": _XML,
}
"""Refused under every policy (names in Spark's function registry, lower case)."""

ALLOWED_FUNCTIONS: frozenset[str] = _names(
    # agg_funcs
    "any any_value approx_count_distinct approx_percentile approx_top_k approx_top_k_accumulate",
    "approx_top_k_combine array_agg avg bit_and bit_or bit_xor bitmap_and_agg",
    "bitmap_construct_agg bitmap_or_agg bool_and bool_or collect_list collect_set collect_union",
    "corr count count_if count_min_sketch covar_pop covar_samp every first first_value grouping",
    "grouping_id histogram_numeric hll_sketch_agg hll_union_agg kll_merge_agg_bigint",
    "kll_merge_agg_double kll_merge_agg_float kll_sketch_agg_bigint kll_sketch_agg_double",
    "kll_sketch_agg_float kurtosis last last_value listagg max max_by mean measure median min",
    "min_by mode percentile percentile_approx percentile_cont percentile_disc regr_avgx",
    "regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy skewness",
    "some std stddev stddev_pop stddev_samp string_agg sum theta_intersection_agg",
    "theta_sketch_agg theta_union_agg try_avg try_sum tuple_intersection_agg_double",
    "tuple_intersection_agg_integer tuple_sketch_agg_double tuple_sketch_agg_integer",
    "tuple_union_agg_double tuple_union_agg_integer var_pop var_samp variance",
    # array_funcs
    "array array_append array_compact array_contains array_distinct array_except array_insert",
    "array_intersect array_join array_max array_min array_position array_prepend array_remove",
    "array_repeat array_size array_union arrays_overlap arrays_zip flatten get sequence slice",
    "sort_array",
    # bitwise_funcs
    "& << >> >>> ^ bit_count bit_get getbit shiftleft shiftright shiftrightunsigned | ~",
    # collection_funcs
    "cardinality concat element_at reverse size try_element_at",
    # conditional_funcs
    "between coalesce if ifnull nanvl nullif nullifzero nvl nvl2 when zeroifnull",
    # conversion_funcs
    "bigint binary boolean cast date decimal double float int smallint string time timestamp",
    "tinyint",
    # csv_funcs
    "from_csv schema_of_csv to_csv",
    # datetime_funcs
    "add_months convert_timezone date_add date_diff date_format date_from_unix_date date_part",
    "date_sub date_trunc dateadd datediff datepart day dayname dayofmonth dayofweek dayofyear",
    "extract from_unixtime from_utc_timestamp hour last_day make_date make_dt_interval",
    "make_interval make_time make_timestamp make_timestamp_ltz make_timestamp_ntz",
    "make_ym_interval minute month monthname months_between next_day quarter second",
    "session_window time_bucket time_diff time_from_micros time_from_millis time_from_seconds",
    "time_to_micros time_to_millis time_to_seconds time_trunc timestamp_micros timestamp_millis",
    "timestamp_nanos timestamp_seconds to_date to_time to_timestamp to_timestamp_ltz",
    "to_timestamp_ntz to_unix_timestamp to_utc_timestamp trunc try_make_interval",
    "try_make_timestamp try_make_timestamp_ltz try_make_timestamp_ntz try_to_date try_to_time",
    "try_to_timestamp unix_date unix_micros unix_millis unix_nanos unix_seconds unix_timestamp",
    "weekday weekofyear window window_time year",
    # generator_funcs
    "explode explode_outer inline inline_outer posexplode posexplode_outer stack",
    # hash_funcs
    "crc32 hash md5 sha sha1 sha2 xxhash64",
    # json_funcs
    "from_json get_json_object json_array_length json_object_keys json_tuple schema_of_json",
    "to_json",
    # lambda_funcs
    "aggregate array_sort exists filter forall map_filter map_zip_with reduce transform",
    "transform_keys transform_values zip_with",
    # map_funcs
    "map map_concat map_contains_key map_entries map_from_arrays map_from_entries map_keys",
    "map_values str_to_map",
    # math_funcs
    "% * + - / abs acos acosh asin asinh atan atan2 atanh bin bround cbrt ceil ceiling conv cos",
    "cosh cot csc degrees div e exp expm1 factorial floor greatest hex hypot least ln log log10",
    "log1p log2 mod negative pi pmod positive pow power radians rint round sec sign signum sin",
    "sinh sqrt tan tanh try_add try_divide try_mod try_multiply try_subtract unhex width_bucket",
    # misc_funcs
    "aes_decrypt assert_true bitmap_bit_position bitmap_bucket_number bitmap_count hmac",
    "raise_error try_aes_decrypt typeof",
    # predicate_funcs
    "! < <= <=> = == > >= and equal_null ilike in isnan isnotnull isnull like not or regexp",
    "regexp_like rlike",
    # sketch_funcs
    "approx_top_k_estimate hll_sketch_estimate hll_union kll_sketch_get_n_bigint",
    "kll_sketch_get_n_double kll_sketch_get_n_float kll_sketch_get_quantile_bigint",
    "kll_sketch_get_quantile_double kll_sketch_get_quantile_float kll_sketch_get_rank_bigint",
    "kll_sketch_get_rank_double kll_sketch_get_rank_float kll_sketch_merge_bigint",
    "kll_sketch_merge_double kll_sketch_merge_float kll_sketch_to_string_bigint",
    "kll_sketch_to_string_double kll_sketch_to_string_float theta_difference theta_intersection",
    "theta_sketch_estimate theta_union tuple_difference_double tuple_difference_integer",
    "tuple_difference_theta_double tuple_difference_theta_integer tuple_intersection_double",
    "tuple_intersection_integer tuple_intersection_theta_double",
    "tuple_intersection_theta_integer tuple_sketch_estimate_double",
    "tuple_sketch_estimate_integer tuple_sketch_summary_double tuple_sketch_summary_integer",
    "tuple_sketch_theta_double tuple_sketch_theta_integer tuple_union_double",
    "tuple_union_integer tuple_union_theta_double tuple_union_theta_integer",
    # st_funcs
    "st_asbinary st_geogfromwkb st_geomfromwkb st_setsrid st_srid",
    # string_funcs
    "ascii base64 bit_length btrim char char_length character_length chr collate collation",
    "concat_ws contains decode elt encode endswith find_in_set format_number format_string",
    "from_base32 initcap instr is_valid_utf8 jaro_winkler_similarity lcase left len length",
    "levenshtein locate lower lpad ltrim luhn_check make_valid_utf8 mask octet_length overlay",
    "position printf quote regexp_count regexp_extract regexp_extract_all regexp_instr",
    "regexp_replace regexp_substr repeat replace right rpad rtrim sentences soundex space split",
    "split_part startswith substr substring substring_index to_base32 to_binary to_char",
    "to_number to_varchar translate trim try_to_binary try_to_number try_validate_utf8 ucase",
    "unbase64 upper validate_utf8",
    # struct_funcs
    "named_struct struct",
    # url_funcs
    "parse_url try_parse_url try_url_decode url_decode url_encode",
    # variant_funcs
    "is_valid_variant is_variant_null parse_json schema_of_variant schema_of_variant_agg",
    "to_variant_object try_parse_json try_variant_array_append try_variant_get",
    "try_variant_insert try_variant_set variant_array_append variant_delete variant_get",
    "variant_insert variant_set variant_strip_nulls",
    # vector_funcs
    "vector_avg vector_cosine_similarity vector_inner_product vector_l2_distance vector_norm",
    "vector_normalize vector_sum",
    # window_funcs
    "counter_diff cume_dist dense_rank lag lead nth_value ntile percent_rank rank row_number",
    # xml_funcs
    "to_xml",
)
"""Functions of Spark 4.3's builtin registry a query may call (grouped as Spark groups them).
Pure functions of their arguments. Aggregates whose result depends on row order (``first``,
``last``, ``any_value``, ``collect_list``, ``collect_set``, ``listagg``) are refused in
transforms on the analyzed plan unless an order-erasing function takes their result
(``sandbox.ORDER_DEPENDENT_AGGREGATES``); ``max_by``/``min_by``/``mode`` depend on row order
only with ties, which a plan does not show, and are accepted."""

TABLE_FUNCTIONS: frozenset[str] = _names(
    "range explode explode_outer inline inline_outer posexplode posexplode_outer stack",
    "json_tuple variant_explode variant_explode_outer",
)
"""Table-valued functions allowed in ``FROM`` (they only generate rows from arguments)."""

# --- Plan nodes ----------------------------------------------------------------------------

PARSED_NODES: frozenset[str] = _names(
    "plans.logical.Project plans.logical.Filter plans.logical.Aggregate plans.logical.Join",
    "plans.logical.Union plans.logical.Intersect plans.logical.Except plans.logical.Distinct",
    "plans.logical.SubqueryAlias plans.logical.UnresolvedWith plans.logical.Generate",
    "plans.logical.Sort plans.logical.GlobalLimit plans.logical.LocalLimit plans.logical.Offset",
    "plans.logical.Pivot plans.logical.Unpivot plans.logical.LateralJoin",
    "plans.logical.OneRowRelation plans.logical.LocalRelation plans.logical.UnresolvedHint",
    "plans.logical.WithWindowDefinition plans.logical.RepartitionByExpression",
    "analysis.UnresolvedRelation analysis.UnresolvedInlineTable",
    "analysis.UnresolvedTableValuedFunction analysis.UnresolvedSubqueryColumnAliases",
    "analysis.UnresolvedTVFAliases analysis.UnresolvedQualify analysis.UnresolvedHaving",
    "expressions.PipeOperator",
)
"""Nodes of a parsed (unresolved) query: relational operators, CTEs, VALUES, hints, named
relations (single-part names only) and table-valued functions (``TABLE_FUNCTIONS`` only)."""

ANALYZED_NODES: frozenset[str] = _names(
    "plans.logical.Project plans.logical.Filter plans.logical.Aggregate plans.logical.Window",
    "plans.logical.Join plans.logical.Union plans.logical.Intersect plans.logical.Except",
    "plans.logical.Distinct plans.logical.Deduplicate plans.logical.SubqueryAlias",
    "plans.logical.WithCTE plans.logical.CTERelationDef plans.logical.CTERelationRef",
    "plans.logical.Generate plans.logical.Sort plans.logical.GlobalLimit",
    "plans.logical.LocalLimit plans.logical.Offset plans.logical.Expand",
    "plans.logical.LocalRelation plans.logical.OneRowRelation plans.logical.Range",
    "plans.logical.ResolvedHint plans.logical.LateralJoin plans.logical.View",
    "plans.logical.RepartitionByExpression plans.logical.Repartition",
    "plans.logical.RebalancePartitions expressions.PipeOperator",
)
"""Nodes of an analyzed query. A ``View`` is a leaf: a temp view of this request's session,
which only the engine creates (input slices and earlier steps, vetted when they ran)."""

REFUSED_NODES: dict[str, str] = {
    "plans.logical.ScriptTransformation": "ScriptTransformation (SELECT TRANSFORM ... USING)",
    "analysis.UnresolvedExecuteImmediate": "EXECUTE IMMEDIATE",
    "plans.logical.ExecuteImmediateQuery": "EXECUTE IMMEDIATE",
    "plans.logical.Sample": "TABLESAMPLE",
    "analysis.PlanWithUnresolvedIdentifier": "the IDENTIFIER clause",
    "plans.logical.CompoundBody": "a SQL script (BEGIN ... END)",
    "plans.logical.InsertIntoStatement": "INSERT",
    "plans.logical.InsertIntoDir": "INSERT OVERWRITE DIRECTORY",
    "plans.logical.SetVariable": "SET VARIABLE",
    "plans.logical.CreateVariable": "DECLARE VARIABLE",
}
"""Nodes refused with a specific name in the message (every other unlisted node is refused
too, by its class name)."""

SAMPLING_NODES = frozenset({"plans.logical.Sample"})
"""Refused in transforms (random rows), allowed in interactive queries."""
