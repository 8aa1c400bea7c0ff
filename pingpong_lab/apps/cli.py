"""`pingpong-lab`: measure and analyse MPI ping-pong from the command line (no Jupyter).

    pingpong-lab sweep --np 2 --kernel c --mode blocking --min-bytes 1 --max-bytes 67108864 \\
        --out results.csv [--rounds 8] [--link rate=1gbit]   # --link: root, emulated network
    pingpong-lab fit results.csv [--piecewise] [--json] [--ols]
    pingpong-lab report [--np 2] [--out report] [--quick]     # measure everything, one folder
    pingpong-lab bench [--np 2] [--out bench-results]         # are our numbers fair? (peers)
    pingpong-lab cohort course [--out course/cohort]          # the class's results and answers
    pingpong-lab hub accounts --instructor NAME STUDENT...   # the course's JupyterHub (root)
    pingpong-lab --version

Each command is a module of pingpong_lab.apps with `parser()` and `main(argv) -> int`, imported
only when it runs; COMMANDS names them. Bad arguments give one line on stderr and exit status
2; a failed run exits with 1.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "sweep": "pingpong_lab.apps.sweep",
    "fit": "pingpong_lab.apps.fit",
    "report": "pingpong_lab.apps.report",
    "bench": "pingpong_lab.apps.bench",
    "cohort": "pingpong_lab.apps.cohort",
    "hub": "pingpong_lab.apps.hub",
}


def command(name: str):
    """The module of command `name` (KeyError for an unknown one)."""
    return importlib.import_module(COMMANDS[name])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = f"usage: pingpong-lab {{{','.join(COMMANDS)}}} ... (pingpong-lab sweep --help)"
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\n" + usage)
        return 0 if argv else 2
    if argv[0] == "--version":
        from .. import __version__

        print(f"pingpong-lab {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"pingpong-lab: error: unknown command {name!r}; {usage}", file=sys.stderr)
        return 2
    return command(name).main(rest)


if __name__ == "__main__":
    sys.exit(main())
