"""Spark SQL through Spark Connect on the seam: what the tool does on it (the backend is
:class:`~pi_notebook.sql.engines.spark_connect.SparkBackend`, the policy table
:mod:`pi_notebook.sql.spark`)."""

from pi_notebook.sql.engines.base import EngineInfo

__all__ = ["ENGINE"]

ENGINE = EngineInfo(
    engine="spark",
    dialect="spark",
    url_scheme="sc://HOST:15002",
    schemes=("sc",),
    read_only_backstop="none: Spark has no read-only mode, so a read passes the classifier "
    "only (writes, SET, CACHE/REFRESH, ADD JAR, temporary views, path reads and "
    "reflect/java_method ask or are refused before anything reaches the cluster)",
    bounds="the statement under limit(cap + 1) (a plan node: a sort becomes a top-N), sent "
    "with the plan that reads it (one round trip), its Arrow result kept to the byte bound; "
    "the statement timeout interrupts the job",
    cancel="interruptTag of the statement's operation tag (added on the thread that runs it); "
    "no transactions: what a stopped write had done stays",
    write_preview="no transaction to roll back: rows counted with the derived SELECT count(*), "
    "else not measured (said so)",
    estimate="EXPLAIN COST (sizeInBytes and rowCount of the optimized plan's scans)",
    arrow=True,
    read_path="Spark Connect's Arrow batches, typed as DataFrame.toArrow types them, the "
    "schema taken from the result's stream",
    extra="spark",
    modules=("pyspark", "grpc", "pyarrow"),
)
