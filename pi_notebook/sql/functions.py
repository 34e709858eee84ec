"""Which function calls are known to be free of side effects, per dialect.

Allow-lists only: a function that is not listed here makes a statement a ``write``
(it needs approval), because a user-defined or extension function can do anything.
Two kinds of entry:

* sqlglot's typed function classes (``exp.Lower``, ``exp.DateTrunc``...): the parser maps
  a known SQL function to one of these whatever the dialect, so they are listed once, in
  :mod:`pi_notebook.sql.functions_sqlglot` (re-exported here).
  ``tests/sql/test_sql_functions.py`` checks that every class sqlglot knows is either in
  :data:`PURE_FUNCTION_CLASSES` or in :data:`IMPURE_FUNCTION_CLASSES`, so a sqlglot
  upgrade cannot silently add an unreviewed class.
* names of functions sqlglot parses as ``exp.Anonymous``, per dialect (lower case).

Also here, to sharpen the reasons: functions that must never run (``REJECT_FUNCTIONS``,
which SQLite's authorizer also denies) and host or network readers
(``HOST_ACCESS_FUNCTIONS``). The allow-list alone decides ``read``; a listed call may still
need approval for the size of what it builds (``sizes.py``) or for the pragma it runs
(``pragma_*`` calls: ``pragmas.py``).
"""

from __future__ import annotations

from pi_notebook.sql import functions_clickhouse, functions_warehouses
from pi_notebook.sql.functions_sqlglot import IMPURE_FUNCTION_CLASSES, PURE_FUNCTION_CLASSES

__all__ = [
    "HOST_ACCESS_FUNCTIONS",
    "IMPURE_FUNCTION_CLASSES",
    "PURE_FUNCTIONS",
    "PURE_FUNCTION_CLASSES",
    "PURE_ONLY_WITHOUT_ARGUMENTS",
    "QUALIFIED_SCHEMAS",
    "REJECT_FUNCTIONS",
]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Aggregates, window functions, maths and string basics spelled the same everywhere.
_COMMON = """
    abs acos asin atan atan2 avg ceil ceiling coalesce cos cot count cume_dist degrees
    dense_rank exp first_value floor greatest lag last_value lead least length ln log log10
    lower ltrim max min mod nth_value ntile nullif percent_rank pi pow power radians rank
    replace round row_number rtrim sign sin sqrt substr substring sum tan trim upper
    stddev stddev_pop stddev_samp var_pop var_samp variance
"""

_POSTGRES = """
    age clock_timestamp date_bin date_part date_trunc extract isfinite justify_days
    justify_hours justify_interval make_date make_interval make_time make_timestamp
    make_timestamptz now statement_timestamp timeofday to_char to_date to_number
    to_timestamp transaction_timestamp timezone
    ascii bit_length btrim char_length character_length chr concat concat_ws convert_from
    convert_to decode encode format initcap left lpad md5 normalize octet_length overlay
    parse_ident position quote_ident quote_literal quote_nullable regexp_count regexp_instr
    regexp_like regexp_match regexp_matches regexp_replace regexp_split_to_array
    regexp_split_to_table regexp_substr repeat reverse right rpad sha224 sha256 sha384 sha512
    split_part starts_with string_agg string_to_array string_to_table strpos to_ascii to_hex
    translate unistr
    array_agg array_append array_cat array_dims array_fill array_length array_lower
    array_ndims array_position array_positions array_prepend array_remove array_replace
    array_to_string array_upper cardinality generate_series generate_subscripts unnest
    trim_array array_sample array_shuffle
    array_to_json json_agg json_array_elements json_array_elements_text json_array_length
    json_build_array json_build_object json_each json_each_text json_extract_path
    json_extract_path_text json_object json_object_agg json_object_keys json_populate_record
    json_populate_recordset json_strip_nulls json_to_record json_to_recordset json_typeof
    jsonb_agg jsonb_array_elements jsonb_array_elements_text jsonb_array_length
    jsonb_build_array jsonb_build_object jsonb_each jsonb_each_text jsonb_extract_path
    jsonb_extract_path_text jsonb_insert jsonb_object jsonb_object_agg jsonb_object_keys
    jsonb_path_exists jsonb_path_match jsonb_path_query jsonb_path_query_array
    jsonb_path_query_first jsonb_populate_record jsonb_populate_recordset jsonb_pretty
    jsonb_set jsonb_set_lax jsonb_strip_nulls jsonb_to_record jsonb_to_recordset jsonb_typeof
    row_to_json to_json to_jsonb json_scalar json_serialize
    bit_and bit_or bit_xor bool_and bool_or every corr covar_pop covar_samp mode
    percentile_cont percentile_disc regr_avgx regr_avgy regr_count regr_intercept regr_r2
    regr_slope regr_sxx regr_sxy regr_syy any_value range_agg range_intersect_agg
    cbrt div factorial gcd lcm log scale trim_scale trunc width_bucket random
    random_normal gen_random_uuid num_nonnulls num_nulls sinh cosh tanh asinh acosh atanh
    sind cosd tand asind acosd atand atan2d cotd
    abbrev broadcast family host hostmask inet_merge inet_same_family masklen netmask network
    set_masklen text
    lower_inf upper_inf lower_inc upper_inc isempty range_merge multirange
    int4range int8range numrange tsrange tstzrange daterange int4multirange
    int8multirange nummultirange tsmultirange tstzmultirange datemultirange
    point box circle lseg line path polygon area center diameter height width radius
    npoints isclosed isopen bound_box pclose popen slope
    row xmlattributes xmlpi xmltext xmlexists txid_current_if_assigned
    to_tsvector to_tsquery plainto_tsquery phraseto_tsquery websearch_to_tsquery ts_rank
    ts_rank_cd ts_headline setweight strip numnode querytree tsvector_to_array
    array_to_tsvector ts_lexize get_current_ts_config
    xmlelement xmlforest xmlconcat xmlagg xmlcomment xmlroot xpath xpath_exists
    xml_is_well_formed xml_is_well_formed_document xml_is_well_formed_content
    current_catalog current_database current_query current_role current_schema
    current_schemas current_setting current_user session_user user version
    inet_client_addr inet_client_port inet_server_addr inet_server_port pg_backend_pid
    pg_conf_load_time pg_postmaster_start_time pg_is_in_recovery pg_jit_available
    pg_trigger_depth pg_current_wal_lsn pg_last_xact_replay_timestamp
    col_description obj_description shobj_description format_type pg_typeof pg_collation_for
    pg_get_constraintdef pg_get_expr pg_get_functiondef pg_get_function_arguments
    pg_get_function_identity_arguments pg_get_function_result pg_get_indexdef
    pg_get_keywords pg_get_partkeydef pg_get_ruledef pg_get_serial_sequence
    pg_get_statisticsobjdef pg_get_triggerdef pg_get_userbyid pg_get_viewdef
    pg_options_to_table pg_tablespace_location pg_index_column_has_property
    pg_index_has_property pg_indexam_has_property pg_column_size pg_column_compression
    pg_database_size pg_indexes_size pg_relation_size pg_size_bytes pg_size_pretty
    pg_table_size pg_tablespace_size pg_total_relation_size pg_relation_filenode
    pg_encoding_to_char pg_char_to_encoding pg_table_is_visible pg_type_is_visible
    pg_function_is_visible pg_opclass_is_visible pg_operator_is_visible
    pg_collation_is_visible pg_conversion_is_visible pg_ts_config_is_visible
    pg_my_temp_schema pg_is_other_temp_schema pg_has_role has_any_column_privilege
    has_column_privilege has_database_privilege has_foreign_data_wrapper_privilege
    has_function_privilege has_language_privilege has_schema_privilege
    has_sequence_privilege has_server_privilege has_table_privilege
    has_tablespace_privilege has_type_privilege to_regclass to_regcollation to_regnamespace
    to_regoper to_regoperator to_regproc to_regprocedure to_regrole to_regtype
    pg_input_is_valid pg_input_error_info pg_get_object_address pg_identify_object
    pg_describe_object currval lastval pg_sequence_last_value
"""

_MYSQL = """
    adddate addtime aes_decrypt aes_encrypt any_value bin bit_and bit_count bit_length
    bit_or bit_xor char char_length character_length charset coercibility collation compress
    concat concat_ws connection_id conv convert_tz crc32 curdate current_date current_role
    current_time current_timestamp current_user curtime database date date_add date_format
    date_sub datediff day dayname dayofmonth dayofweek dayofyear elt export_set extract field
    find_in_set format format_bytes format_pico_time found_rows from_base64 from_days
    from_unixtime get_format group_concat hex hour if ifnull inet6_aton inet6_ntoa inet_aton
    inet_ntoa insert instr is_ipv4 is_ipv4_compat is_ipv4_mapped is_ipv6 is_uuid isnull
    json_array json_arrayagg json_contains json_contains_path json_depth json_extract
    json_keys json_length json_merge json_merge_patch json_merge_preserve json_object
    json_objectagg json_overlaps json_pretty json_quote json_remove json_replace json_schema_valid
    json_search json_set json_storage_free json_storage_size json_table json_type json_unquote
    json_valid json_value json_array_append json_array_insert json_insert json_detailed
    json_loose json_compact json_exists json_query json_normalize json_equals json_arrayagg
    last_day last_insert_id lcase left localtime localtimestamp locate log2 lpad make_set
    makedate maketime md5 member_of microsecond mid minute month monthname name_const now oct
    octet_length ord period_add period_diff position quarter quote regexp_instr regexp_like
    regexp_replace regexp_substr repeat reverse right row_count rpad schema sec_to_time second
    session_user sha sha1 sha2 soundex space std str_to_date strcmp subdate substring_index
    subtime sysdate system_user time time_format time_to_sec timediff timestamp timestampadd
    timestampdiff to_base64 to_days to_seconds truncate ucase uncompress uncompressed_length
    unhex unix_timestamp user utc_date utc_time utc_timestamp uuid uuid_to_bin
    bin_to_uuid version week weekday weekofyear year yearweek json_arrayagg
    median percentile_cont percentile_disc nvl nvl2 natural_sort_key sys_guid decode_oracle
    ln log rand random_bytes sformat statement_digest_text weight_string
    is_free_lock is_used_lock icu_version row
"""

_SQLITE = """
    changes char concat concat_ws format glob hex ifnull iif instr last_insert_rowid like
    likelihood likely octet_length printf quote random randomblob sign soundex
    sqlite_compileoption_get sqlite_compileoption_used sqlite_offset sqlite_source_id
    sqlite_version total_changes typeof unhex unicode unlikely zeroblob
    date time datetime julianday unixepoch strftime timediff
    group_concat string_agg total median
    json json_array json_array_length json_error_position json_extract json_insert
    json_object json_patch json_pretty json_quote json_remove json_replace json_set json_type
    json_valid json_group_array json_group_object json_each json_tree jsonb jsonb_array
    jsonb_extract jsonb_insert jsonb_object jsonb_patch jsonb_remove jsonb_replace jsonb_set
    jsonb_group_array jsonb_group_object
    acosh asinh atanh ceil cosh log2 sinh tanh trunc
    generate_series
"""

_DUCKDB = """
    age array_agg array_aggr array_aggregate array_append array_apply array_cat
    array_concat array_contains array_cosine_similarity array_distance array_distinct
    array_dot_product array_extract array_filter array_has array_has_all array_has_any
    array_indexof array_inner_product array_length array_pop_back array_pop_front
    array_position array_prepend array_push_back array_push_front array_reduce
    array_resize array_reverse array_reverse_sort array_select array_slice array_sort
    array_to_string array_transform array_unique array_value array_where array_zip
    list list_aggr list_aggregate list_any_value list_append list_apply list_avg
    list_bool_and list_bool_or list_cat list_concat list_contains list_cosine_similarity
    list_count list_distance list_distinct list_dot_product list_element list_extract
    list_filter list_first list_grade_up list_has list_has_all list_has_any list_indexof
    list_inner_product list_last list_max list_median list_min list_mode list_pack
    list_position list_prepend list_product list_reduce list_resize list_reverse
    list_reverse_sort list_select list_slice list_sort list_string_agg list_sum
    list_transform list_unique list_value list_where list_zip flatten apply filter reduce
    generate_series range unnest cardinality element_at
    map map_concat map_contains map_entries map_extract map_from_entries map_keys
    map_values struct_extract struct_insert struct_pack row union_value union_extract
    union_tag
    ascii bar bin bit_count bit_length bit_position chr concat concat_ws contains
    damerau_levenshtein editdist3 ends_with format format_bytes formatreadabledecimalsize
    formatreadablesize from_base64 from_binary from_hex hamming hash hex ilike_escape
    instr jaccard jaro_similarity jaro_winkler_similarity lcase left len levenshtein
    like_escape lpad md5 md5_number mismatches nfc_normalize not_ilike_escape
    not_like_escape ord parse_dirname parse_dirpath parse_filename parse_path position
    prefix printf regexp_escape regexp_extract regexp_extract_all regexp_full_match
    regexp_matches regexp_replace regexp_split_to_array regexp_split_to_table repeat reverse
    right rpad sha1 sha256 split split_part starts_with str_split str_split_regex strip_accents
    string_split string_split_regex string_to_array strlen strpos suffix to_base64
    to_binary to_hex translate ucase unbin unhex unicode url_decode url_encode
    century current_date current_localtime current_localtimestamp current_time
    current_timestamp date_add date_diff date_part date_sub date_trunc datediff datepart
    datesub datetrunc day dayname dayofmonth dayofweek dayofyear decade epoch epoch_ms
    epoch_ns epoch_us era get_current_time get_current_timestamp hour isodow isoyear
    julian last_day make_date make_time make_timestamp make_timestamptz microsecond
    millennium millisecond minute month monthname nanosecond now quarter second strftime
    strptime time_bucket timezone timezone_hour timezone_minute to_centuries to_days
    to_decades to_hours to_microseconds to_millennia to_milliseconds to_minutes to_months
    to_quarters to_seconds to_timestamp to_weeks to_years today transaction_timestamp
    try_strptime week weekday weekofyear year yearweek
    json json_array json_array_length json_contains json_exists
    json_extract json_extract_path json_extract_path_text json_extract_string json_group_array
    json_group_object json_group_structure json_keys json_merge_patch json_object json_pretty
    json_quote json_serialize_sql json_structure json_transform
    json_transform_strict json_type json_valid json_value to_json from_json from_json_strict
    any_value approx_count_distinct approx_quantile approx_top_k arbitrary arg_max
    arg_max_null arg_min arg_min_null argmax argmin bit_and bit_or bit_xor bitstring_agg
    bool_and bool_or corr count_if count_star countif covar_pop covar_samp entropy favg
    first fsum geomean geometric_mean group_concat histogram kahan_sum kurtosis kurtosis_pop
    last list listagg mad max_by mean median min_by mode product quantile quantile_cont
    quantile_disc regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx
    regr_sxy regr_syy reservoir_quantile sem skewness string_agg sumkahan weighted_avg
    cbrt even factorial fdiv fmod gamma gcd greatest_common_divisor isfinite isinf isnan
    lcm least_common_multiple lgamma log2 nextafter random round_even roundbankers
    signbit trunc xor acosh asinh atanh cosh sinh tanh
    current_database current_catalog current_query current_schema current_schemas
    current_setting current_user user session_user version typeof uuid gen_random_uuid
    uuidv4 uuidv7 uuid_extract_timestamp uuid_extract_version alias constant_or_null
    error ifnull nullif if coalesce to_json vector_type stats
    duckdb_columns duckdb_constraints duckdb_databases duckdb_dependencies
    duckdb_extensions duckdb_functions duckdb_indexes duckdb_keywords duckdb_schemas
    duckdb_sequences duckdb_settings duckdb_tables duckdb_types duckdb_views
    duckdb_memory duckdb_approx_database_count
    test_all_types
    array_cosine_distance array_cross_product array_grade_up array_negative_dot_product
    array_negative_inner_product array_to_json base64 bitstring col_description
    current_connection_id current_query_id current_transaction_id currval days_in_month
    enum_code enum_first enum_last enum_range enum_range_boundary equi_width_bins
    format_pg_type format_type generate_subscripts get_type grade_up in_search_path
    has_any_column_privilege has_column_privilege has_database_privilege
    has_function_privilege has_schema_privilege has_sequence_privilege has_table_privilege
    inet_client_addr inet_client_port inet_server_addr inet_server_port json_each json_tree
    json_deep_merge json_insert json_merge_patch_diff json_normalize json_replace
    json_deserialize_sql left_grapheme length_grapheme right_grapheme substring_grapheme
    list_approx_count_distinct list_bit_and list_bit_or list_bit_xor list_entropy
    list_histogram list_intersect list_kurtosis list_kurtosis_pop list_mad
    list_negative_dot_product list_negative_inner_product list_sem list_skewness
    list_stddev_pop list_stddev_samp list_var_pop list_var_samp make_timestamp_ms
    make_timestamp_ns map_contains_entry map_contains_value map_extract_value
    md5_number_lower md5_number_upper normalized_interval obj_description shobj_description
    octet_length parse_formatted_bytes path_join pg_typeof pg_size_pretty
    pg_get_constraintdef pg_get_expr pg_get_viewdef pg_has_role pg_my_temp_schema
    pg_is_other_temp_schema pg_postmaster_start_time pg_conf_load_time pg_table_is_visible
    pg_type_is_visible pg_function_is_visible pg_timezone_names row_to_json struct_concat
    struct_contains struct_extract_at struct_has struct_indexof struct_keys
    struct_position struct_update struct_values to_base wavg arg_max_nulls_last
    arg_min_nulls_last histogram_exact histogram_values lttb ago repeat_row
    variant_extract variant_extract_string variant_keys variant_type variant_typeof
    duckdb_available_metrics duckdb_connection_count duckdb_optimizers duckdb_triggers
    duckdb_prepared_statements duckdb_temporary_files duckdb_variables duckdb_secret_types
    add subtract multiply divide binom set_bit can_cast_implicitly create_sort_key
    icu_sort_key make_type cast_to_type replace_type remap_struct vertex_extract
    is_histogram_other_bin unpivot_list hive_partition_component
    bitstring_byte_comparable timetz_byte_comparable parse_duckdb_log_message
    st_asbinary st_asgeojson st_astext st_aswkb st_aswkt st_crs st_geomfromgeojson
    st_geomfromwkb st_intersects_extent st_setcrs variant_array_length
    variant_bytes_to_variant variant_comparator variant_contains variant_exists
    variant_normalize variant_group_array variant_group_object sum_no_overflow fill
    rank_dense assert_true get_block_size array_to_string_comma_default map_to_pg_oid
    map_type_id_to_pg_oid has_foreign_data_wrapper_privilege has_language_privilege
    has_server_privilege has_tablespace_privilege pg_collation_is_visible
    pg_conversion_is_visible pg_opclass_is_visible pg_operator_is_visible
    pg_opfamily_is_visible pg_ts_config_is_visible pg_ts_dict_is_visible
    pg_ts_parser_is_visible pg_ts_template_is_visible duckdb_coordinate_systems
    duckdb_dialects duckdb_extension_repositories icu_calendar_names
"""

PURE_FUNCTIONS: dict[str, frozenset[str]] = {
    "postgres": _names(_COMMON + _POSTGRES),
    "mysql": _names(_COMMON + _MYSQL),
    "sqlite": _names(_COMMON + _SQLITE),
    "duckdb": _names(_COMMON + _DUCKDB),
    "clickhouse": functions_clickhouse.PURE_FUNCTIONS | functions_clickhouse.PURE_TABLE_FUNCTIONS,
    **functions_warehouses.PURE_FUNCTIONS,
}
"""Per dialect: lower-case names of functions parsed as ``exp.Anonymous`` that are known
to be free of side effects. A pure function can still be slow; that is the engine's
statement timeout's business, not approval's."""

QUALIFIED_SCHEMAS: dict[str, frozenset[str]] = {
    "postgres": frozenset({"pg_catalog"}),
    "mysql": frozenset(),
    "sqlite": frozenset(),
    "duckdb": frozenset(),
    "clickhouse": frozenset(),
    **functions_warehouses.QUALIFIED_SCHEMAS,
}
"""Schemas whose functions are the built-ins themselves: ``pg_catalog.lower(x)`` is the
same function as ``lower(x)``; any other qualifier names a user-defined function."""

REJECT_FUNCTIONS: dict[str, frozenset[str]] = {
    "postgres": _names(
        "lo_export pg_file_write pg_file_rename pg_file_unlink pg_file_sync pg_logdir_ls"
    ),
    "mysql": _names("sys_exec sys_eval"),
    "sqlite": _names("load_extension fts3_tokenizer writefile edit"),
    "duckdb": _names("write_csv"),
    "clickhouse": functions_clickhouse.REJECT_FUNCTIONS,
    **functions_warehouses.NONE,
}
"""Functions that reach outside the database in a way approval must not be able to
allow: writing host files (``lo_export``, adminpack, SQLite's ``writefile``), running
programs (``sys_exec``), loading native code (``load_extension``, ``fts3_tokenizer``)."""

HOST_ACCESS_FUNCTIONS: frozenset[str] = _names(
    """
    pg_read_file pg_read_binary_file pg_ls_dir pg_stat_file pg_ls_logdir pg_ls_waldir
    pg_ls_tmpdir pg_ls_archive_statusdir lo_import dblink dblink_exec dblink_connect
    dblink_send_query dblink_open dblink_fetch query_to_xml query_to_xml_and_xmlschema
    table_to_xml cursor_to_xml load_file readfile read_csv read_csv_auto read_json
    read_json_auto read_json_objects read_ndjson read_ndjson_auto read_ndjson_objects
    read_parquet parquet_scan parquet_metadata parquet_schema parquet_file_metadata
    parquet_kv_metadata read_text read_blob read_xlsx glob sniff_csv query query_table
    iceberg_scan delta_scan getenv
    """
)
"""Functions that read host files, the network or run SQL hidden in a string; they get
a sharper reason. They are ``write`` (D1: not reads of the database)."""

PURE_ONLY_WITHOUT_ARGUMENTS: dict[str, frozenset[str]] = {
    "postgres": frozenset(),
    "mysql": _names("last_insert_id"),
    "sqlite": frozenset(),
    "duckdb": frozenset(),
    "clickhouse": frozenset(),
    **functions_warehouses.NONE,
}
"""Functions that only report when called bare: MySQL ``LAST_INSERT_ID(expr)`` sets the
value the session's next ``LAST_INSERT_ID()`` returns."""
