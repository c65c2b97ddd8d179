"""The ``fdcore`` command. Each subcommand lives in the module that does its work."""

from __future__ import annotations

import argparse
import functools
import logging
import os
import select
import shlex
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence

from fdcore import __version__
from fdcore.environment.actions import URL_SETTING
from fdcore.errors import FdcoreError, PluginError
from fdcore.plugins.manager import COMMAND, Plugins, load_plugins

RunCommand = Callable[[argparse.Namespace], int]


def build_parser(plugins: Plugins | None = None) -> argparse.ArgumentParser:
    """The ``fdcore`` parser: the commands of ``plugins`` (default: the installed ones), fdcore's
    own (plugin ``commands``, fdcore/cli/plugin.py) first."""
    parser = argparse.ArgumentParser(
        prog="fdcore",
        description="Share one environment's work across a fleet of agents through a mailbox "
        "in storage they all reach (a local folder, OneLake / ADLS Gen2, S3 or a store that "
        "speaks its API).",
        epilog="Every command: one line on stderr and a non-zero exit on error (docs/agents.md).",
    )
    parser.add_argument("--version", action="version", version=f"fdcore {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plugins = plugins or load_plugins()
    for name, command in plugins.implementations(COMMAND).items():
        description = getattr(command, "description", None) or command.help
        sub = commands.add_parser(name, help=command.help, description=description)
        try:
            command.add_arguments(sub)
        except Exception as exc:  # one broken command must not take the others down
            problem = f"command {name!r} of plugin {plugins.provider(COMMAND, name)} is broken"
            commands.choices[name] = _refusing(name, f"{problem}: {type(exc).__name__}: {exc}")
            continue
        sub.set_defaults(run=command.run)
    for name, clash in plugins.clashes(COMMAND).items():
        commands.add_parser(name, help=f"unusable: {clash}")
        commands.choices[name] = _refusing(name, clash)
    return parser


def _refusing(name: str, problem: str) -> argparse.ArgumentParser:
    """A command that cannot run: whatever its arguments, it fails with ``problem``."""
    parser = _Refusing(prog=f"fdcore {name}", add_help=False)
    parser.set_defaults(run=functools.partial(_refuse, problem))
    return parser


class _Refusing(argparse.ArgumentParser):
    """Takes every argument unread (they belong to a command that is not there)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace = namespace or argparse.Namespace()
        for dest, value in self._defaults.items():
            setattr(namespace, dest, value)
        return namespace, []


def _refuse(problem: str, args: argparse.Namespace) -> int:
    raise PluginError(problem)


SDK_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3", "azure")
ERROR = 2  # bad input, configuration or environment: what the one-line error says to fix
BUG = 70  # EX_SOFTWARE (sysexits.h): an exception fdcore did not expect
BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Every error is one line on stderr: an :class:`FdcoreError` says what to
    fix (exit 2); anything else is a bug, whose traceback goes to a file (or stderr under -v)."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    # Known before parsing: building the parser loads plugins, which may fail too.
    verbose = "-v" in arguments or "--verbose" in arguments
    naming = URL_SETTING.set("--env")  # a command's environment is its --env, not a parameter
    try:
        args = build_parser().parse_args(arguments)
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        if not args.verbose:  # a cloud SDK's chatter ("Found endpoint ...") only under -v
            for sdk in SDK_LOGGERS:
                logging.getLogger(sdk).setLevel(logging.WARNING)
        run: RunCommand = args.run
        code = run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below
        return code
    except FdcoreError as exc:
        print(f"fdcore: error: {_one_line(str(exc)) or type(exc).__name__}", file=sys.stderr)
        return ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError as exc:
        if _stdout_reader_gone():
            return BROKEN_PIPE
        return _bug(exc, verbose, arguments)
    except Exception as exc:
        return _bug(exc, verbose, arguments)
    finally:
        URL_SETTING.reset(naming)


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader went away (``fdcore queue | head``): nothing to
    report then, and stdout is pointed at /dev/null so the final flush does not fail again. Any
    other broken pipe is a bug."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        gone = any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError):  # stdout without a file descriptor (captured in a test)
        return False
    if gone:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return gone


def _bug(exc: Exception, verbose: bool, argv: list[str]) -> int:
    """One line naming the exception and the file holding its traceback (under -v, the
    traceback itself on stderr)."""
    what = _one_line(f"{type(exc).__name__}: {exc}")
    saved = None if verbose else _save_traceback(exc, argv)
    if saved is None:
        traceback.print_exception(exc, file=sys.stderr)
        print(f"fdcore: internal error: {what}", file=sys.stderr)
    else:
        print(
            f"fdcore: internal error: {what} (a bug; the traceback is in {saved}, "
            "or run with -v to print it)",
            file=sys.stderr,
        )
    return BUG


def _save_traceback(exc: Exception, argv: list[str]) -> str | None:
    """Write the command line and traceback to a new private file in the temporary folder
    (``$TMPDIR``, else ``/tmp``); its path, or None if none could be written."""
    try:
        fd, path = tempfile.mkstemp(prefix="fdcore-traceback-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(f"fdcore {__version__}: {shlex.join(['fdcore', *argv])}\n\n")
            file.write("".join(traceback.format_exception(exc)))
    except OSError:
        return None
    return path


if __name__ == "__main__":
    sys.exit(main())
