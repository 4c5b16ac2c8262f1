"""`delaybound` command line: one parser, one subcommand module per area.

Each ``delaybound/cmd_*.py`` module exposes ``register(subparsers)``, which adds its
subcommand(s) and sets ``func`` (a callable ``(args) -> int`` exit code) on the parser.
Errors: ``ValueError``/``TypeError``/``FileNotFoundError`` raised by the library are
user errors; they are printed as one line on stderr with exit code 2, no traceback.
An ``OSError`` about a path (a file where a folder is wanted, no permission, a read-only
folder, a full disk: ``ENOSPC``, ``EDQUOT``, ``EROFS``) is the same kind of error: one line
naming the path and the errno, exit 2; the file being written is left as it was (atomic writes,
:mod:`llm_validation.records.atomic_io`) and rows and checkpoints written before stay. A folder another
process is writing is refused the same way, naming that process
(:mod:`llm_validation.records.folder_lock`). SIGINT and SIGTERM end any command with one line and exit code 130 /
143 (:mod:`llm_validation.sweep.interrupt`; a command that runs workers stops them first and
says what finished and how to resume).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from typing import Sequence

__all__ = ["main", "build_parser", "COMMAND_MODULES", "DefaultsFormatter", "help_without_default"]

#: The subcommand modules, in the order they appear in ``--help``. A fixed list, not a registry.
COMMAND_MODULES = (
    "delaybound.cmd_theory",    # theory {list,show,check,latex,eval}
    "delaybound.cmd_numerics",  # verify, plot
    "delaybound.cmd_train",     # train
    "delaybound.cmd_data",      # data {prepare,info}
    "delaybound.cmd_validate",  # validate, sweep
    "delaybound.cmd_bench",     # bench
    "delaybound.cmd_simulate",  # simulate
    "delaybound.cmd_advise",    # advise
    "delaybound.cmd_reproduce", # reproduce
    "delaybound.cmd_delay_law", # delay-law {plan,protocol,run,predict,assemble}
    "delaybound.demo",          # demo
)


class DefaultsFormatter(argparse.HelpFormatter):
    """Every option's help shows its default: ``(default: X)`` appended unless the help already
    says it (the word "default"), ``(default: none)`` for an option that is off unless given; a
    flag (on/off) and a required option get nothing appended."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or "default" in text.lower() or action.nargs == 0
                or action.required or action.default is argparse.SUPPRESS):
            return text
        return f"{text} (default: {'none' if action.default is None else '%(default)s'})"


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # argparse's own errors: one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="delaybound",
        description=(
            "Theory-verification toolkit for asynchronous (PipeDream-2BW, one-step delayed) "
            "pipeline-parallel LLM pretraining: checked convergence bounds, numerical "
            "verification, and real training with gradient statistics."
        ),
    )
    from delaybound import __version__
    parser.add_argument("--version", action="version", version=f"delaybound {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # only a missing command module itself is tolerated
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def help_without_default(parser: argparse.ArgumentParser) -> list[str]:
    """``command --option`` of every option of every (nested) subcommand whose ``--help`` does
    not show its default (a value option whose help, as printed, has no "default"): what
    :class:`DefaultsFormatter` and the help texts must leave empty."""
    out = []
    for action in parser._actions:                                        # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):                # noqa: SLF001
            for sub in action.choices.values():
                out += help_without_default(sub)
    formatter = parser._get_formatter()                                   # noqa: SLF001
    for a in parser._actions:                                             # noqa: SLF001
        if not a.option_strings or a.nargs == 0 or a.required or a.help == argparse.SUPPRESS:
            continue
        shown = formatter._expand_help(a) if a.help else ""               # noqa: SLF001
        if "default" not in shown.lower():
            out.append(f"{parser.prog} {a.option_strings[-1]}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from llm_validation.sweep.interrupt import Interrupted, exit_code, raising_signals
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with raising_signals():
            code = args.func(args)
    except (ValueError, TypeError, FileNotFoundError, KeyError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"delaybound {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        detail = exc.detail if isinstance(exc, Interrupted) else ""
        resume = "; run the same command again to resume (finished runs are kept)"
        print(f"delaybound {args.command}: interrupted by {signal.Signals(signum).name}"
              + (f": {detail}{resume}" if detail else ""), file=sys.stderr)
        return exit_code(signum)
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly, as Unix tools do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # a path: no permission, read-only, disk full (one line, errno)
        from llm_validation.records.atomic_io import describe
        print(f"delaybound {args.command}: error: {describe(exc)}", file=sys.stderr)
        return 2
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
