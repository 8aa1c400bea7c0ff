"""JupyterHub settings of the course: `sudo make hub` serves them (see docs/deploying.md).

Everything comes from the roster that `pingpong-lab hub accounts` wrote (the instructor, the
students, the exchange) and from $PINGPONG_LAB_HUB_SPAWNER (local or slurm): see
pingpong_lab/apps/hub.py. Site settings (a public address, TLS, another authenticator) go below
the call, where they override it.
"""

from pingpong_lab.apps import hub

c = get_config()  # noqa: F821 (JupyterHub provides get_config)
hub.configure(c)
