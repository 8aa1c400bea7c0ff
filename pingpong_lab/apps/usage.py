"""Command-line errors as one line: the parser the commands of `pingpong-lab` share."""

from __future__ import annotations

import argparse


class UsageError(Exception):
    """A command-line or input error, reported as one line with exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise UsageError (one line, no usage dump, no SystemExit):
    the command prints `<prog>: error: <message>` and returns 2."""

    def error(self, message):
        raise UsageError(message)
