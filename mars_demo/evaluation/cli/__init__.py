"""``mars-demo evaluate JOB``: one subcommand per job, each a module of this package with its
own parser, ``--help`` and ``main``; the work itself lives in the evaluation modules they call.

- ``evaluate run --data SOURCE --out RUN_DIR``: run (or resume) an evaluation (:mod:`.run`);
  ``accelerate launch -m mars_demo evaluate run ...`` or ``torchrun`` share it among
  processes, ``--shard K/N`` runs one share.
- ``evaluate merge OUT PART...``: join the shares of a run (:mod:`.merge`).
- ``evaluate compare RUN_A RUN_B``: B - A with paired bootstrap intervals (:mod:`.compare`).
- ``evaluate calibrate RUN_DIR``: P(correct) from an uncertainty (:mod:`.calibrate`).
- ``evaluate rejudge RUN_DIR --out NEW_DIR``: new verdicts for a finished run (:mod:`.rejudge`).
- ``evaluate check-judge FILE --judge NAME,...``: judges against human labels
  (:mod:`.check_judge`).

The flags of the time before the subcommands (``evaluate --data ... --out ...``, ``evaluate
--compare A B``, ``--merge``, ``--calibrate RUN_DIR``, ``--rejudge``, ``--judge-check FILE``)
still work: :func:`old_spelling` turns them into the subcommand and a one-line note says so.
"""

from __future__ import annotations

from typing import Any, Sequence

from . import calibrate, check_judge, common, compare, merge, rejudge, run

#: subcommand -> its module (each has ``HELP``, ``add_parser(sub, flags)`` and
#: ``main(args, settings_of)``)
JOBS = {"run": run, "merge": merge, "compare": compare, "calibrate": calibrate,
        "rejudge": rejudge, "check-judge": check_judge}


def add_parser(sub: Any, add_option, add_llm_help) -> None:
    """Add ``evaluate`` and its subcommands to the CLI's subparsers (``add_option`` and
    ``add_llm_help``: the CLI's helpers that build flags from the option schema). Each
    subcommand's parser sets ``evaluate_main``, the function that runs it."""
    ev = sub.add_parser(
        "evaluate", help="evaluate MARS on labelled questions: run, merge, compare, calibrate, "
        "rejudge, check-judge",
        description="Evaluate the uncertainties on labelled questions. One subcommand per job; "
        "`evaluate JOB --help` lists its flags.")
    jobs = ev.add_subparsers(dest="job", required=True, metavar="JOB",
                             parser_class=type(ev))
    flags = common.Flags(add_option, add_llm_help)
    for name, module in JOBS.items():
        parser = module.add_parser(jobs, flags)
        parser.set_defaults(evaluate_main=module.main)
        assert parser.prog.endswith(f"evaluate {name}"), name


#: the old flags of a mode -> its subcommand (the flag's values become its positionals)
_MODES = (("--merge", "merge"), ("--compare", "compare"), ("--rejudge", "rejudge"))


def old_spelling(argv: Sequence[str]) -> list[str] | None:
    """``evaluate``'s arguments (after the word ``evaluate``) in the old spelling, turned into
    the subcommands'; None when they are in the new one already.

    >>> old_spelling(["--compare", "a", "b", "--json"])
    ['compare', 'a', 'b', '--json']
    >>> old_spelling(["--data", "d.jsonl", "--out", "r", "--calibrate"])
    ['run', '--data', 'd.jsonl', '--out', 'r', '--calibrate']
    >>> old_spelling(["--calibrate", "r", "--calibration-out", "c.json"])
    ['calibrate', 'r', '--out', 'c.json']
    >>> old_spelling(["run", "--data", "d"]) is None
    True
    """
    args = list(argv)
    if not args or args[0] in JOBS or args[0] in ("-h", "--help"):
        return None
    return _translated(args)


def _translated(args: list[str]) -> list[str]:
    flags = [a.split("=", 1)[0] for a in args]
    for flag, job in _MODES:
        if flag in flags:
            return [job, *_without_flag(args, flag)]
    if "--calibrate" in flags:
        at = flags.index("--calibrate")
        value = args[at].split("=", 1)[1] if "=" in args[at] else (
            args[at + 1] if at + 1 < len(args) and not args[at + 1].startswith("-") else "")
        if value and "--data" not in flags:  # an existing run
            rest = [("--out" + a[len("--calibration-out"):]) if a.split("=", 1)[0]
                    == "--calibration-out" else a for a in _without_flag(args, "--calibrate")]
            return ["calibrate", *rest]
    if "--judge-check" in flags and "--data" not in flags:
        return ["check-judge", *_without_flag(args, "--judge-check")]
    return ["run", *args]


def _without_flag(args: list[str], flag: str) -> list[str]:
    """``args`` without ``flag`` itself; its values stay where they were, as positionals
    (``--flag=value`` becomes ``value``)."""
    out = []
    for a in args:
        if a == flag:
            continue
        out.append(a.split("=", 1)[1] if a.startswith(flag + "=") else a)
    return out
