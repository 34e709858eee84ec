"""The warehouse dialects' built-ins that read only their arguments (allow-lists, lower case).

``TABLE(...)`` and ``DESCRIPTOR(...)`` only wrap a table function's arguments (Trino): the
function inside is judged on its own. Only names sqlglot parses as ``exp.Anonymous`` matter here (the typed classes are judged once
for every dialect in ``functions.py``); listing a name that sqlglot types is harmless. A name
not listed asks: a user-defined, external or unknown function can do anything.
"""

from __future__ import annotations

__all__ = ["NONE", "PURE_FUNCTIONS", "QUALIFIED_SCHEMAS"]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Left off for Spark: xpath*, from_xml and schema_of_xml parse XML with the JVM's parser
# (whether a document's external entities, host files, stay unresolved is the cluster's setting).
_SPARK = """
    abs acos acosh add_months aes_decrypt aes_encrypt aggregate and any any_value
    approx_count_distinct approx_percentile array array_agg array_append array_compact
    array_contains array_distinct array_except array_insert array_intersect array_join
    array_max array_min array_position array_prepend array_remove array_repeat array_size
    array_sort array_union arrays_overlap arrays_zip ascii asin asinh assert_true atan atan2
    atanh avg base64 bigint bin binary bit_and bit_count bit_get bit_length bit_or bit_xor
    bitmap_bit_position bitmap_bucket_number bitmap_construct_agg bitmap_count bitmap_or_agg
    bool_and bool_or boolean bround btrim cardinality cast cbrt ceil ceiling char
    char_length character_length chr coalesce collate collation collect_list collect_set
    concat concat_ws contains conv convert_timezone corr cos cosh cot count count_if
    count_min_sketch covar_pop covar_samp crc32 csc cume_dist curdate current_catalog
    current_database current_date current_schema current_timestamp current_timezone
    current_user date date_add date_diff date_format date_from_unix_date date_part date_sub
    date_trunc dateadd datediff datepart day dayname dayofmonth dayofweek dayofyear decimal
    decode degrees dense_rank div double e element_at elt encode endswith equal_null every
    exists exp explode explode_outer expm1 extract factorial filter find_in_set first
    first_value flatten float floor forall format_number format_string from_csv from_json
    from_unixtime from_utc_timestamp get get_json_object getbit greatest grouping
    grouping_id hash hex histogram_numeric hll_sketch_agg hll_sketch_estimate hll_union
    hll_union_agg hour hypot if ifnull ilike initcap inline inline_outer
    input_file_block_length input_file_block_start input_file_name instr int is_valid_utf8
    is_variant_null isnan isnotnull isnull json_array_length json_object_keys json_tuple
    kurtosis lag last last_day last_value lcase lead least left len length levenshtein like
    ln localtimestamp locate log log10 log1p log2 lower lpad ltrim luhn_check make_date
    make_dt_interval make_interval make_timestamp make_timestamp_ltz make_timestamp_ntz
    make_valid_utf8 make_ym_interval map map_concat map_contains_key map_entries map_filter
    map_from_arrays map_from_entries map_keys map_values map_zip_with mask max max_by md5
    mean median min min_by minute mod mode monotonically_increasing_id month monthname
    months_between named_struct nanvl negative next_day not now nth_value ntile nullif
    nullifzero nvl nvl2 octet_length or overlay parse_json parse_url percent_rank percentile
    percentile_approx percentile_cont percentile_disc pi pmod posexplode posexplode_outer
    position positive pow power printf quarter radians raise_error rand randn random randstr
    range rank rebalance reduce regexp regexp_count regexp_extract regexp_extract_all
    regexp_instr regexp_like regexp_replace regexp_substr regr_avgx regr_avgy regr_count
    regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy repartition
    repartition_by_range repeat replace reverse right rint rlike round row_number rpad rtrim
    schema_of_csv schema_of_json schema_of_variant schema_of_variant_agg sec second
    sentences sequence session_user session_window sha sha1 sha2 shiftleft shiftright
    shiftrightunsigned shuffle sign signum sin sinh size skewness slice smallint some
    sort_array soundex space spark_partition_id split split_part sql_keywords sqrt stack
    startswith std stddev stddev_pop stddev_samp str_to_map string struct substr substring
    substring_index sum tan tanh timestamp timestamp_micros timestamp_millis
    timestamp_seconds tinyint to_binary to_char to_csv to_date to_json to_number
    to_timestamp to_timestamp_ltz to_timestamp_ntz to_unix_timestamp to_utc_timestamp
    to_varchar to_variant_object to_xml transform transform_keys transform_values translate
    trim trunc try_add try_aes_decrypt try_avg try_divide try_element_at try_mod
    try_multiply try_parse_json try_parse_url try_subtract try_sum try_to_binary
    try_to_number try_to_timestamp try_url_decode try_validate_utf8 try_variant_get typeof
    ucase unbase64 unhex uniform unix_date unix_micros unix_millis unix_seconds
    unix_timestamp upper url_decode url_encode user uuid validate_utf8 var_pop var_samp
    variance variant_explode variant_explode_outer variant_get version weekday weekofyear
    width_bucket window window_time xxhash64 year zeroifnull zip_with current_version
"""

_TRINO = """
    abs acos all_match any_match approx_distinct approx_most_frequent approx_percentile
    approx_set arbitrary array_agg array_distinct array_except array_histogram
    array_intersect array_join array_max array_min array_position array_remove array_sort
    array_union arrays_overlap asin at_timezone atan atan2 avg bar beta_cdf
    bing_tile bitwise_and bitwise_and_agg bitwise_left_shift bitwise_not bitwise_or
    bitwise_or_agg bitwise_right_shift bitwise_right_shift_arithmetic bitwise_xor bool_and
    bool_or cardinality cast cbrt ceil ceiling char2hexint checksum chr classify codepoint
    coalesce color combinations concat concat_ws contains contains_sequence corr cos cosh
    cosine_distance cosine_similarity count count_if covar_pop covar_samp crc32 cume_dist
    current_catalog current_date current_groups current_path current_schema current_time
    current_timestamp current_timezone current_user date date_add date_diff date_format
    date_parse date_trunc day day_of_month day_of_week day_of_year degrees dense_rank
    descriptor dow doy e element_at empty_approx_set euclidean_distance evaluate_classifier_predictions
    every exclude_columns exp features filter first_value flatten floor format
    format_datetime format_number from_base from_base32 from_base64 from_base64url
    from_big_endian_32 from_big_endian_64 from_hex from_ieee754_32 from_ieee754_64
    from_iso8601_date from_iso8601_timestamp from_iso8601_timestamp_nanos from_unixtime
    from_unixtime_nanos from_utf8 geometric_mean greatest hamming_distance histogram hmac_md5
    hmac_sha1 hmac_sha256 hmac_sha512 hour human_readable_seconds if index infinity
    inverse_beta_cdf inverse_normal_cdf is_finite is_infinite is_json_scalar is_nan
    json_array json_array_contains json_array_get json_array_length json_exists json_extract
    json_extract_scalar json_format json_object json_parse json_query json_size json_value
    kurtosis lag last_day_of_month last_value lead learn_classifier learn_libsvm_classifier
    least length levenshtein_distance listagg ln localtime localtimestamp log log10 log2
    lower lpad ltrim luhn_check make_set_digest map map_agg map_concat map_entries
    map_filter map_from_entries map_keys map_union map_union_sum map_values map_zip_with
    max max_by md5 merge merge_set_digest millisecond min min_by minute mod month
    multimap_agg multimap_from_entries murmur3 nan ngrams none_match normal_cdf normalize
    now nth_value ntile nullif numeric_histogram parse_data_size parse_datetime
    parse_duration percent_rank pi position pow power qdigest_agg quarter radians rand
    random rank reduce reduce_agg regexp_count regexp_extract regexp_extract_all
    regexp_like regexp_position regexp_replace regexp_split regr_intercept regr_slope
    repeat replace reverse rgb round row_number rpad rtrim second sequence sha1 sha256
    sha512 shuffle sign sin sinh skewness slice soundex spooky_hash_v2_32
    spooky_hash_v2_64 split split_part split_to_map split_to_multimap sqrt starts_with
    stddev stddev_pop stddev_samp strpos substr substring sum t_cdf t_pdf tan tanh
    tdigest_agg timestamp_objectid timezone_hour timezone_minute to_base to_base32
    to_base64 to_base64url to_big_endian_32 to_big_endian_64 to_char to_date to_hex
    to_ieee754_32 to_ieee754_64 to_iso8601 to_milliseconds to_timestamp to_unixtime
    to_utf8 transform transform_keys transform_values translate trim trim_array truncate
    try try_cast typeof upper url_decode url_encode url_extract_fragment url_extract_host
    url_extract_parameter url_extract_path url_extract_port url_extract_protocol
    url_extract_query uuid value_at_quantile values_at_quantiles var_pop var_samp variance
    version week week_of_year width_bucket wilson_interval_lower wilson_interval_upper
    with_timezone word_stem xxhash64 year year_of_week yow zip zip_with table prev next first
    last classifier match_number
"""

_SNOWFLAKE = """
    abs acos acosh add_months any_value approx_count_distinct approx_percentile
    approx_percentile_accumulate approx_percentile_estimate approx_top_k
    approximate_jaccard_index approximate_similarity array_agg array_append array_cat
    array_compact array_construct array_construct_compact array_contains array_distinct
    array_except array_flatten array_generate_range array_insert array_intersection
    array_max array_min array_position array_prepend array_remove array_remove_at
    array_reverse array_size array_slice array_sort array_to_string array_union_agg
    array_unique_agg arrays_overlap arrays_to_object arrays_zip as_array as_binary
    as_boolean as_char as_date as_decimal as_double as_integer as_number as_object as_real
    as_time as_timestamp_ltz as_timestamp_ntz as_timestamp_tz as_varchar ascii asin asinh
    atan atan2 atanh avg base64_decode_binary base64_decode_string base64_encode bit_length
    bitand bitand_agg bitmap_bit_position bitmap_bucket_number bitmap_construct_agg
    bitmap_count bitmap_or_agg bitnot bitor bitor_agg bitshiftleft bitshiftright bitxor
    bitxor_agg booland booland_agg boolnot boolor boolor_agg boolxor boolxor_agg cbrt ceil
    charindex check_json check_xml chr coalesce collate collation compress concat
    concat_ws contains convert_timezone corr cos cosh cot count count_if covar_pop
    covar_samp cume_dist current_account current_account_name current_available_roles
    current_client current_database current_date current_ip_address current_region
    current_role current_schema current_schemas current_secondary_roles current_session
    current_statement current_time current_timestamp current_transaction current_user
    current_version current_warehouse date date_from_parts date_part date_trunc dateadd
    datediff day dayname dayofmonth dayofweek dayofweekiso dayofyear decode decompress_binary
    decompress_string degrees dense_rank div0 div0null editdistance endswith equal_null
    exp extract factorial first_value flatten floor get get_ignore_case get_path getbit
    greatest greatest_ignore_nulls grouping grouping_id hash hash_agg haversine hex_decode_binary
    hex_decode_string hex_encode hll hll_accumulate hll_combine hll_estimate hour iff ifnull
    ilike ilike_any initcap insert is_array is_binary is_boolean is_char is_date
    is_date_value is_decimal is_double is_integer is_null_value is_object is_real is_time
    is_timestamp_ltz is_timestamp_ntz is_timestamp_tz is_varchar jarowinkler_similarity
    json_extract_path_text kurtosis lag last_day last_value lead least least_ignore_nulls
    left len length like_all like_any listagg ln localtime localtimestamp log lower lpad
    ltrim max max_by md5 md5_binary md5_hex md5_number_lower64 md5_number_upper64 median
    min min_by minhash minhash_combine minute mod mode monthname months_between month
    next_day normal nth_value ntile nullif nullifzero nvl nvl2 object_agg object_construct
    object_construct_keep_null object_delete object_insert object_keys object_pick
    octet_length parse_ip parse_json parse_url parse_xml percent_rank percentile_cont
    percentile_disc pi position pow power previous_day quarter radians random randstr rank
    ratio_to_report regexp regexp_count regexp_instr regexp_like regexp_replace
    regexp_substr regexp_substr_all regr_avgx regr_avgy regr_count regr_intercept regr_r2
    regr_slope regr_sxx regr_sxy regr_syy repeat replace reverse right rlike round
    row_number rpad rtrim rtrimmed_length sha1 sha1_binary sha1_hex sha2 sha2_binary
    sha2_hex sign sin sinh skew soundex soundex_p123 space split split_part split_to_table
    sqrt square st_area st_astext st_asgeojson st_aswkt st_contains st_distance st_dwithin
    st_geographyfromwkt st_geomfromwkt st_intersects st_makepoint st_point st_x st_y
    startswith stddev stddev_pop stddev_samp strip_null_value strtok strtok_split_to_table
    strtok_to_array substr substring sum sysdate systimestamp tan tanh time time_from_parts
    time_slice timeadd timediff timestamp_from_parts timestamp_ltz_from_parts
    timestamp_ntz_from_parts timestamp_tz_from_parts timestampadd timestampdiff to_array
    to_binary to_boolean to_char to_date to_decimal to_double to_geography to_geometry
    to_json to_number to_numeric to_object to_time to_timestamp to_timestamp_ltz
    to_timestamp_ntz to_timestamp_tz to_varchar to_variant to_xml translate trim trunc
    truncate try_base64_decode_binary try_base64_decode_string try_cast try_hex_decode_binary
    try_hex_decode_string try_parse_json try_to_binary try_to_boolean try_to_date
    try_to_decimal try_to_double try_to_number try_to_numeric try_to_time try_to_timestamp
    try_to_timestamp_ltz try_to_timestamp_ntz try_to_timestamp_tz typeof unicode uniform
    upper uuid_string var_pop var_samp variance variance_pop variance_samp vector_cosine_similarity
    vector_inner_product vector_l2_distance week weekiso weekofyear width_bucket xmlget year
    yearofweek yearofweekiso zeroifnull zipf prev next first last classifier match_number
"""

_BIGQUERY = """
    abs acos acosh any_value approx_count_distinct approx_quantiles approx_top_count
    approx_top_sum array array_agg array_concat array_concat_agg array_first array_includes
    array_includes_all array_includes_any array_last array_length array_reverse array_slice
    array_to_string ascii asin asinh atan atan2 atanh avg bit_and bit_count bit_or bit_xor
    bool byte_length cast cbrt ceil ceiling char_length character_length chr code_points_to_bytes
    code_points_to_string coalesce collate concat contains_substr corr cos cosh cosine_distance
    cot coth count countif covar_pop covar_samp csc csch cume_dist current_date
    current_datetime current_time current_timestamp date date_add date_bucket date_diff
    date_from_unix_date date_sub date_trunc datetime datetime_add datetime_bucket
    datetime_diff datetime_sub datetime_trunc dense_rank div edit_distance ends_with
    euclidean_distance exp extract farm_fingerprint first_value float64 floor format
    format_date format_datetime format_time format_timestamp from_base32 from_base64 from_hex
    generate_array generate_date_array generate_range_array generate_timestamp_array
    generate_uuid greatest grouping hll_count_extract hll_count_init hll_count_merge
    hll_count_merge_partial ieee_divide if ifnull initcap instr int64 is_inf is_nan
    json_array json_array_append json_array_insert json_extract json_extract_array
    json_extract_scalar json_extract_string_array json_keys json_object json_query
    json_query_array json_remove json_set json_strip_nulls json_type json_value
    json_value_array justify_days justify_hours justify_interval lag last_day last_value
    lax_bool lax_float64 lax_int64 lax_string lead least left length ln log log10
    logical_and logical_or lower lpad ltrim make_interval max max_by md5 min min_by mod
    normalize normalize_and_casefold nth_value ntile nullif nullifzero octet_length
    parse_bignumeric parse_date parse_datetime parse_json parse_numeric parse_time
    parse_timestamp percent_rank percentile_cont percentile_disc pow power rand
    range range_bucket range_contains range_end range_intersect range_overlaps range_start
    rank regexp_contains regexp_extract regexp_extract_all regexp_instr regexp_replace
    regexp_substr repeat replace reverse right round row_number rpad rtrim safe_add
    safe_cast safe_convert_bytes_to_string safe_divide safe_multiply safe_negate
    safe_subtract sec sech session_user sha1 sha256 sha512 sign sin sinh soundex split
    sqrt st_area st_asbinary st_asgeojson st_astext st_buffer st_centroid st_contains
    st_covers st_distance st_dwithin st_geogfromgeojson st_geogfromtext st_geogfromwkb
    st_geogpoint st_intersects st_length st_makeline st_npoints st_perimeter st_x st_y
    starts_with stddev stddev_pop stddev_samp string string_agg strpos struct substr
    substring sum tan tanh time time_add time_diff time_sub time_trunc timestamp
    timestamp_add timestamp_bucket timestamp_diff timestamp_micros timestamp_millis
    timestamp_seconds timestamp_sub timestamp_trunc to_base32 to_base64 to_code_points
    to_hex to_json to_json_string translate trim trunc typeof unicode unix_date unix_micros
    unix_millis unix_seconds upper var_pop var_samp variance zeroifnull
    divide multiply add subtract negate ipv4_to_int64 ipv4_from_int64 ip_from_string
    ip_to_string ip_net_mask ip_trunc safe_ip_from_string host public_suffix reg_domain
    extract merge merge_partial init new_keyset add_key_from_raw_bytes keyset_chain
    keyset_from_json keyset_to_json keyset_length rotate_keyset decrypt_bytes
    decrypt_string encrypt
"""

PURE_FUNCTIONS: dict[str, frozenset[str]] = {
    "spark": _names(_SPARK),
    "trino": _names(_TRINO),
    "snowflake": _names(_SNOWFLAKE),
    "bigquery": _names(_BIGQUERY),
}
"""Per warehouse dialect: built-ins known to read only their arguments, the clock, the
session's identity or a random source (table functions that only generate rows included)."""

QUALIFIED_SCHEMAS: dict[str, frozenset[str]] = {
    "spark": frozenset(),
    "trino": frozenset(),
    "snowflake": frozenset(),
    "bigquery": frozenset({"safe", "net", "hll_count", "keys", "aead", "deterministic_encrypt"}),
}
"""Qualifiers that name built-in function families (BigQuery's ``SAFE.``, ``NET.``,
``HLL_COUNT.``, ``KEYS.``, ``AEAD.``); any other qualifier names a user's function or a
model (``ML.``, ``AI.``), which asks."""

NONE: dict[str, frozenset[str]] = {
    name: frozenset() for name in ("spark", "trino", "snowflake", "bigquery")
}
"""An empty entry per warehouse dialect (their refused calls are in their own modules)."""
