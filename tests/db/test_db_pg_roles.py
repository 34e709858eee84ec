"""``role_per_user`` on PostgreSQL: each statement runs under the role of whom the call acts
for, so the database's own privileges apply per person; a role that cannot be used refuses
the call and runs nothing; the role ends with the call; other engines refuse the option."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from dbtest_support import FakeAudit

from pi_notebook import create_agent_session
from pi_notebook.database import database_extension
from pi_notebook.identity import acting_for
from pi_notebook.sql.backend import DatabaseBackend, QueryError, QueryRefused, query_args_hash
from pi_notebook.sql.backend.arrow import arrow_available
from pi_notebook.sql.engines import create_backend
from pi_notebook.testing import ScriptedModel, text, tool_call

pytestmark = pytest.mark.postgres


RUN = uuid.uuid4().hex[:10]
"""This run's token. Roles belong to the whole server, shared by every test run on it (each run
has only its own database): every role a test makes ends with ``RUN`` and a number, and the
module's end drops any of this run's roles still there."""
_numbers = itertools.count(1)


@dataclass(frozen=True)
class Cluster:
    """Roles made for one test: a login, ``ana`` (SELECT on ``open_t``), ``bo`` (SELECT and
    UPDATE on both tables), ``cy`` (exists, not granted to the login); every name ends with
    ``tag``."""

    admin: str
    login_url: str
    login: str
    ana: str
    bo: str
    cy: str
    tag: str


def _drop_roles(admin: sa.Engine, tag: str) -> None:
    """Drop every role whose name ends with ``tag`` (its privileges in this database first),
    each on its own, so one that cannot be dropped does not keep the others."""
    with admin.connect() as conn:
        names = conn.execute(
            sa.text("SELECT rolname FROM pg_roles WHERE strpos(rolname, :run) > 0"), {"run": RUN}
        ).scalars()
        for name in [n for n in names if n.endswith(tag)]:
            quoted = '"' + name.replace('"', '""') + '"'
            conn.execute(sa.text(f"DROP OWNED BY {quoted}"))
            conn.execute(sa.text(f"DROP ROLE {quoted}"))


@pytest.fixture(scope="module")
def run_roles(pg_url: str) -> Iterator[str]:
    """The admin URL; at the module's end, no role of this run is left on the server."""
    yield pg_url
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        _drop_roles(admin, "")
        with admin.connect() as conn:
            left = conn.execute(
                sa.text("SELECT count(*) FROM pg_roles WHERE strpos(rolname, :run) > 0"),
                {"run": RUN},
            ).scalar()
        assert left == 0, f"{left} role(s) of run {RUN} were not dropped"
    finally:
        admin.dispose()


@pytest.fixture
def cluster(run_roles: str) -> Iterator[Cluster]:
    pg_url = run_roles
    tag = f"{RUN}_{next(_numbers)}"
    login, ana, bo, cy = (f"pi_login_{tag}", f"ana_{tag}", f"bo_{tag}", f"cy_{tag}")
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            for sql in (
                f"CREATE ROLE {login} LOGIN NOINHERIT",
                f"CREATE ROLE {ana} NOLOGIN",
                f"CREATE ROLE {bo} NOLOGIN",
                f"CREATE ROLE {cy} NOLOGIN",
                f"GRANT {ana}, {bo} TO {login}",
                "DROP TABLE IF EXISTS open_t, closed_t",
                "CREATE TABLE open_t (id int PRIMARY KEY, v int)",
                "CREATE TABLE closed_t (id int PRIMARY KEY, secret text)",
                "INSERT INTO open_t VALUES (1, 10), (2, 20)",
                "INSERT INTO closed_t VALUES (1, 's')",
                f"GRANT SELECT ON open_t TO {ana}",
                f"GRANT SELECT, UPDATE ON open_t, closed_t TO {bo}",
            ):
                conn.execute(sa.text(sql))
        url = sa.make_url(pg_url).set(username=login, password=None)
        yield Cluster(pg_url, url.render_as_string(hide_password=False), login, ana, bo, cy, tag)
    finally:
        try:
            with admin.connect() as conn:
                conn.execute(sa.text("DROP TABLE IF EXISTS open_t, closed_t"))
        finally:
            _drop_roles(admin, tag)  # the test's own roles too (a quoted odd name)
            admin.dispose()


def _values(admin_url: str) -> list[int]:
    engine = sa.create_engine(admin_url)
    try:
        with engine.connect() as conn:
            return [
                int(v) for v in conn.execute(sa.text("SELECT v FROM open_t ORDER BY id")).scalars()
            ]
    finally:
        engine.dispose()


async def _approved_run(backend: DatabaseBackend, call_id: str, sql: str) -> object:
    backend.capabilities.grant(call_id, query_args_hash(sql, backend.dialect), 60)
    return await backend.run(call_id, sql)


async def test_each_person_reads_what_their_role_may(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = FakeAudit()
    backend = DatabaseBackend(cluster.login_url, role_per_user=True, audit=audit, arrow=False)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("PI_NOTEBOOK_USER", cluster.ana)
    try:
        out = await backend.run("r1", "SELECT current_user AS u, session_user AS s")
        assert out.dataframe.to_dict("records") == [{"u": cluster.ana, "s": cluster.login}]
        assert (await backend.run("r2", "SELECT v FROM open_t ORDER BY id")).row_count == 2
        with pytest.raises(QueryError, match="permission denied for table closed_t"):
            await backend.run("r3", "SELECT * FROM closed_t")
        assert [r["payload"]["db_role"] for r in audit.of("final_args")] == [cluster.ana] * 3
        monkeypatch.setenv("PI_NOTEBOOK_USER", cluster.bo)
        assert (await backend.run("r4", "SELECT secret FROM closed_t")).row_count == 1
        # The role ends with the call: the pool's connection is the login's again.
        backend._slot.release()  # pyright: ignore[reportPrivateUsage]
        with backend.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT current_user")).scalar() == cluster.login
    finally:
        backend.dispose()


async def test_approved_writes_and_previews_run_under_the_persons_role(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = DatabaseBackend(cluster.login_url, role_per_user=True)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    update = "UPDATE open_t SET v = v + 1 WHERE id = 1"
    try:
        monkeypatch.setenv("PI_NOTEBOOK_USER", cluster.ana)
        preview = await backend.preview("p1", update)
        assert preview.affected_rows is None and "permission denied" in (preview.note or "")
        with pytest.raises(QueryError, match="permission denied for table open_t"):
            await _approved_run(backend, "w1", update)
        assert _values(cluster.admin) == [10, 20]
        monkeypatch.setenv("PI_NOTEBOOK_USER", cluster.bo)
        assert (await backend.preview("p2", update)).affected_rows == 1
        await _approved_run(backend, "w2", update)
        assert _values(cluster.admin) == [11, 20]
    finally:
        backend.dispose()


async def test_a_role_that_cannot_be_used_refuses_and_runs_nothing(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = FakeAudit()
    backend = DatabaseBackend(cluster.login_url, role_per_user=True, audit=audit)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    update = "UPDATE open_t SET v = 0"
    try:
        monkeypatch.setenv("PI_NOTEBOOK_USER", "nobody_" + cluster.ana)
        with pytest.raises(QueryRefused, match=r"role nobody_ana_\w+ does not exist"):
            await backend.run("r1", "SELECT 1")
        with pytest.raises(QueryRefused, match="does not exist"):
            await _approved_run(backend, "w1", update)
        monkeypatch.setenv("PI_NOTEBOOK_USER", cluster.cy)
        grant = f"role {cluster.cy} is not granted to the login {cluster.login}"
        with pytest.raises(QueryRefused, match=f"{grant}.*GRANT {cluster.cy} TO {cluster.login}"):
            await _approved_run(backend, "w2", update)
        with pytest.raises(QueryRefused, match=grant):
            await backend.preview("p1", update)
        assert _values(cluster.admin) == [10, 20]
        failures = [r["payload"]["error"] for r in audit.of("query_error")]
        assert len(failures) == 3 and all("nothing was run" in f for f in failures)
    finally:
        backend.dispose()


async def test_role_for_maps_users_and_mcp_requests_act_for_their_subject(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("PI_NOTEBOOK_USER", "someone")
    backend = DatabaseBackend(
        cluster.login_url, role_per_user=True, role_for={"ana@example.org": cluster.ana}
    )
    try:
        with acting_for("ana@example.org"):
            out = await backend.run("r1", "SELECT current_user AS u")
        assert out.dataframe["u"].tolist() == [cluster.ana]
        with pytest.raises(QueryRefused, match="no database role is configured for user someone"):
            await backend.run("r2", "SELECT 1")
    finally:
        backend.dispose()
    quoted = DatabaseBackend(
        cluster.login_url,
        role_per_user=True,
        role_for=lambda _user: f'{cluster.ana}"; RESET ROLE; --',
    )
    try:
        with pytest.raises(QueryRefused, match="does not exist"):
            await quoted.run("r3", "SELECT 1")
    finally:
        quoted.dispose()


async def test_a_role_name_is_used_exactly_as_written(cluster: Cluster) -> None:
    odd = f'Odd "Role" {cluster.ana}'  # capitals, a quote and spaces: only a quoted identifier
    admin = sa.create_engine(cluster.admin, isolation_level="AUTOCOMMIT")
    quoted = odd.replace('"', '""')
    backend = DatabaseBackend(cluster.login_url, role_per_user=True, role_for=lambda _u: odd)
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE ROLE "{quoted}" NOLOGIN'))
            conn.execute(sa.text(f'GRANT "{quoted}" TO {cluster.login}'))
        out = await backend.run("r1", "SELECT current_user AS u")
        assert out.dataframe["u"].tolist() == [odd]
    finally:
        backend.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP ROLE IF EXISTS "{quoted}"'))
        admin.dispose()


@pytest.mark.skipif(not arrow_available("postgresql"), reason="no pyarrow/ADBC")
async def test_the_arrow_read_runs_under_the_persons_role(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("PI_NOTEBOOK_USER", cluster.ana)
    backend = DatabaseBackend(cluster.login_url, role_per_user=True, arrow=True)
    try:
        out = await backend.run("r1", "SELECT current_user::text AS u, v FROM open_t ORDER BY id")
        assert out.dataframe["u"].tolist() == [cluster.ana, cluster.ana]
        with pytest.raises(QueryError, match="permission denied for table closed_t"):
            await backend.run("r2", "SELECT * FROM closed_t")
        monkeypatch.setenv("PI_NOTEBOOK_USER", cluster.cy)
        with pytest.raises(QueryRefused, match="is not granted to the login"):
            await backend.run("r3", "SELECT v FROM open_t")
    finally:
        backend.dispose()


async def test_the_read_budget_estimate_runs_under_the_persons_role(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_notebook.sql.engines import estimate_read

    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("PI_NOTEBOOK_USER", cluster.ana)
    backend = DatabaseBackend(cluster.login_url, role_per_user=True)
    try:
        assert (await estimate_read(backend, "SELECT * FROM open_t")).rows is not None
        denied = await estimate_read(backend, "SELECT * FROM closed_t")
        assert denied.rows is None and "permission denied" in denied.source
    finally:
        backend.dispose()


def test_role_per_user_is_refused_on_other_engines() -> None:
    with pytest.raises(ValueError, match="role_per_user needs PostgreSQL; sqlite"):
        DatabaseBackend("sqlite://", role_per_user=True)
    with pytest.raises(ValueError, match="role_per_user needs PostgreSQL; duckdb"):
        create_backend("duckdb:///:memory:", role_per_user=True)


class _Yes:
    async def confirm(
        self, title: str, message: str, *, signal: object = None, timeout: float | None = None
    ) -> bool:
        return True


async def test_the_extension_runs_an_approved_write_under_the_persons_role(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("PI_NOTEBOOK_USER", "bo")
    update = "UPDATE open_t SET v = 5 WHERE id = 2"
    model = ScriptedModel([[tool_call("query_database", {"sql": update}, id="c1")], text("ok")])
    ext = database_extension(cluster.login_url, role_per_user=True, role_for={"bo": cluster.bo})
    session = create_agent_session(
        model=model, extensions=[ext], ui=_Yes(), audit=f"sqlite:///{tmp_path / 'audit.sqlite'}"
    )
    try:
        await session.prompt("go")
        assert _values(cluster.admin) == [10, 5]
        assert session.audit is not None
        frame = session.audit.to_dataframe()
        [payload] = frame[frame["kind"] == "final_args"]["payload"].tolist()
        assert payload["db_role"] == cluster.bo
    finally:
        await session.close()


def test_the_extension_refuses_role_per_user_on_other_engines_at_start() -> None:
    session = create_agent_session(
        model=ScriptedModel([text("x")]),
        audit=None,
        extensions=[database_extension("sqlite://", role_per_user=True)],
    )
    [diagnostic] = session.diagnostics
    assert diagnostic.message.endswith(
        "role_per_user needs PostgreSQL; sqlite statements would run with the login's own "
        "privileges."
    )
    assert "query_database" not in session.active_tool_names
