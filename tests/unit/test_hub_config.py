"""The course hub's settings and its accounts step, without a hub: what each server gets, what
each spawner sets, and clear refusals (tests/hub runs the real hub)."""

from __future__ import annotations

import json
import pwd

import pytest
from traitlets.config import Config

from pingpong_lab.apps import hub

ME = pwd.getpwuid(0).pw_name  # an account that exists: its home is looked up


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_HUB", str(tmp_path))
    roster = {"instructor": ME, "students": ["daemon"], "exchange": "/srv/x"}
    (tmp_path / "roster.json").write_text(json.dumps(roster))
    return tmp_path


def test_without_a_roster_the_hub_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_HUB", str(tmp_path))
    with pytest.raises(hub.HubError, match="hub accounts --instructor NAME STUDENT"):
        hub.configure(Config())


def test_the_roster_decides_who_logs_in_and_who_is_admin(state):
    c = Config()
    hub.configure(c)
    assert c.Authenticator.allowed_users == {ME, "daemon"}
    assert c.Authenticator.admin_users == {ME}
    assert c.JupyterHub.spawner_class == hub.SPAWNERS["local"]
    assert c.JupyterHub.db_url.endswith(str(state / "jupyterhub.sqlite"))


def test_slurm_servers_are_jobs_submitted_as_their_user(state, monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_HUB_SPAWNER", "slurm")
    c = Config()
    hub.configure(c)
    assert c.JupyterHub.spawner_class == "batchspawner.SlurmSpawner"
    assert c.SlurmSpawner.exec_prefix.endswith("runuser -u {username} --")
    assert c.SlurmSpawner.req_srun == ""  # the job's CPUs stay free for the engines' ranks
    assert "SLURM_CONF" in c.SlurmSpawner.env_keep


def test_an_unknown_spawner_is_named(state, monkeypatch):
    monkeypatch.setenv("PINGPONG_LAB_HUB_SPAWNER", "kubernetes")
    with pytest.raises(hub.HubError, match="one of local, slurm"):
        hub.configure(Config())


def test_students_get_the_student_lab_and_the_instructor_the_course(state):
    roster = hub.read_roster(state)
    student = hub.server_environment("daemon", roster)
    teacher = hub.server_environment(ME, roster)
    assert student["JUPYTER_CONFIG_DIR"].endswith("jupyter/student")
    assert student["JUPYTER_PATH"].endswith("jupyter/student/share")  # the cell check's kernel
    assert teacher["JUPYTER_CONFIG_DIR"].endswith("jupyter/instructor")
    assert teacher["JUPYTER_CONFIG_PATH"] == f"{pwd.getpwnam(ME).pw_dir}/course"
    for name, env in (("daemon", student), (ME, teacher)):
        assert env["PINGPONG_LAB_EXCHANGE"] == "/srv/x"
        assert env["JUPYTERLAB_WORKSPACES_DIR"].startswith(pwd.getpwnam(name).pw_dir)


@pytest.mark.parametrize(
    "names, says",
    [
        (["Ana"], "not a user name: 'Ana'"),
        (["ana", "ana"], "given twice"),
        (["-x"], "not a user name"),
    ],
)
def test_bad_names_are_refused_before_any_account_is_made(names, says, monkeypatch):
    monkeypatch.setattr(hub.os, "geteuid", lambda: 0)
    with pytest.raises(hub.HubError, match=says):
        hub.add_accounts(names[0], names[1:])


def test_accounts_need_root(monkeypatch):
    monkeypatch.setattr(hub.os, "geteuid", lambda: 1000)
    with pytest.raises(hub.HubError, match="needs root"):
        hub.add_accounts("ines", ["ana"])


def test_a_python_that_other_accounts_cannot_reach_is_refused(tmp_path, monkeypatch):
    private = tmp_path / "private"
    (private / "bin").mkdir(parents=True)
    private.chmod(0o700)
    monkeypatch.setattr(hub.os, "geteuid", lambda: 0)
    monkeypatch.setattr(hub.sys, "executable", str(private / "bin" / "python"))
    monkeypatch.setattr(hub, "_exists", lambda user: pytest.fail("an account was made"))
    with pytest.raises(hub.HubError, match="which other accounts cannot enter"):
        hub.add_accounts("ines", ["ana"])
