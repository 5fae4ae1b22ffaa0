"""Refuse command-line arguments that neither this project nor Beam knows, before anything runs.

Beam's `PipelineOptions` only logs "Discarding unparseable args" and goes on, so a typo such as
`--estimat` or `--embeding_model=none` would start a full, paid run with the default instead.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence

from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser


def beam_and_project_parser() -> _BeamArgumentParser:
    """A parser that knows every flag of every registered `PipelineOptions` subclass (Beam's
    runners, SDK and I/O options, and this project's), with abbreviations off as in Beam."""
    from pipelines.options import ChunkCorpusOptions  # registers the project's flags

    parser = _BeamArgumentParser(
        prog="corpus-chunker", allow_abbrev=False, add_help=False, exit_on_error=False
    )
    classes = {str(cls): cls for cls in [*PipelineOptions.__subclasses__(), ChunkCorpusOptions]}
    for cls in classes.values():
        cls._add_argparse_args(parser)
    return parser


def unknown_flag_error(argv: Sequence[str]) -> str | None:
    """The error for the first argument that no registered option knows (None when all are
    known), with the closest known flag as a suggestion."""
    parser = beam_and_project_parser()
    try:
        _, unknown = parser.parse_known_args(list(argv))
    except argparse.ArgumentError as e:  # a known flag with a bad value: --chunk_size=abc
        return str(e)
    if not unknown:
        return None
    known = [flag for action in parser._actions for flag in action.option_strings]
    flags = [arg for arg in unknown if arg.startswith("-")]
    if not flags:
        return (
            f"unexpected argument {unknown[0]!r}: every argument is a --flag "
            "(inputs go in --input, the output folder in --output)"
        )
    arg = flags[0]
    name = arg.split("=", 1)[0]
    # "--chunk-size" and "--chunksize" mean --chunk_size: compare spellings without _ and -
    folded = {flag.replace("-", "").replace("_", ""): flag for flag in known}
    guess = folded.get(name.replace("-", "").replace("_", ""))
    if guess is None:
        close = difflib.get_close_matches(name, known, n=1)
        guess = close[0] if close else None
    hint = f"; did you mean {guess}?" if guess else ""
    return f"unknown flag {arg}: neither corpus-chunker nor Beam has {name}{hint}"


def reject_unknown_flags(argv: Sequence[str]) -> None:
    """Raise ValueError naming the first unknown argument, before any file is touched."""
    error = unknown_flag_error(argv)
    if error is not None:
        raise ValueError(error)
