"""How the command line fails: one line (or one JSON object) on stderr and an exit status, never a traceback.

=====  ==========================================================================================
 exit  meaning
=====  ==========================================================================================
  0    success
  1    mergetable refused or failed the operation (a :class:`MergeTableError`: bad option, no such
       table, snapshot or column, commit conflict …); nothing was changed
  2    usage: the command line itself is wrong (unknown command or flag, a value of the wrong form)
  3    an unexpected error (storage failure, a bug); its class and message are printed
 130   interrupted (Ctrl-C)
=====  ==========================================================================================

With ``--json`` the error is a JSON object on stderr, ``{"error": {"class": …, "message": …, "exit_code": …}}``,
and stdout stays empty; without it, one line ``mergetable: error: <message>`` on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from mergetable.core.errors import ArgumentError, MergeTableError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNEXPECTED = 3
EXIT_INTERRUPTED = 130


class UsageError(ArgumentError):
    """The command line is malformed: an unknown command or flag, a missing or ill-formed argument."""

    def __init__(self, message: str) -> None:
        MergeTableError.__init__(self, message)
        self.argument = ""


class Parser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def exit_code(exc: BaseException) -> int:
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    if isinstance(exc, MergeTableError):
        return EXIT_ERROR
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_UNEXPECTED


def message_of(exc: BaseException, uri: str | None) -> str:
    """One line: the error's own message, plus the location and class where it does not speak for itself."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, MergeTableError):
        return text
    if isinstance(exc, OSError) and uri and uri not in text:
        return f"{uri}: {text}"
    return text if isinstance(exc, OSError) else f"{type(exc).__name__}: {text}"


def report(exc: BaseException, as_json: bool, uri: str | None = None) -> int:
    """Print ``exc`` as the command line's failure and return its exit status."""
    code = exit_code(exc)
    message = message_of(exc, uri)
    if as_json:
        error = {"class": type(exc).__name__, "message": message, "exit_code": code}
        print(json.dumps({"error": error}), file=sys.stderr)
    else:
        print(f"mergetable: error: {message}", file=sys.stderr)
    return code


def guarded(run: Callable[[], None], as_json: bool, uri: Callable[[], str | None]) -> int:
    """Run a command: 0 when it succeeds, else the failure :func:`report` printed."""
    try:
        run()
    except BrokenPipeError:  # the reader of stdout went away (`mergetable read … | head`): not a failure
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (Exception, KeyboardInterrupt) as exc:
        return report(exc, as_json, uri())
    return EXIT_OK
