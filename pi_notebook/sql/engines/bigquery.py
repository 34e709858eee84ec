"""BigQuery on the seam: its dialect and policy table only ("dialect only": no connection)."""

from pi_notebook.sql.engines.base import EngineInfo

__all__ = ["ENGINE"]

ENGINE = EngineInfo(
    engine="bigquery",
    dialect="bigquery",
    url_scheme="bigquery://PROJECT/DATASET",
    schemes=("bigquery",),
    read_only_backstop="maximum_bytes_billed and IAM roles (not enforced by this tool yet); "
    "the tool cannot connect to BigQuery yet",
    bounds="none yet: the tool cannot connect to BigQuery",
    cancel=None,
    write_preview="none yet: the tool cannot connect to BigQuery",
    connects=False,
    tested_against="dialect only",
)
