"""docs/flags.md, the table of every job flag, made from the option definitions.

`python -m pipelines.flags_doc` rewrites docs/flags.md; tests/test_readme.py fails when the
committed file is not what `render()` gives now, and when a default the README quotes is not
`default_text()` of its flag.
"""

from __future__ import annotations

import argparse
import os

from pipelines.options import ChunkCorpusOptions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS_MD = os.path.join(ROOT, "docs", "flags.md")

_HEADER = """\
# Flags of the job

Generated from `pipelines/options.py` by `python -m pipelines.flags_doc`; do not edit by hand
(`tests/test_readme.py` fails when this file is not what the generator makes). The default
column is the flag's value when it is not given; where that is `–`, the job works the value out
and the meaning says how. Beam's own flags (`--runner`, `--direct_num_workers`,
`--job_endpoint`, `--project`, ...) also apply; `corpus-chunker --help` prints the same list.
"""


def flag_actions() -> list[argparse.Action]:
    """The job's flags, in the order `corpus-chunker --help` prints them."""
    parser = argparse.ArgumentParser(prog="corpus-chunker", add_help=False)
    ChunkCorpusOptions._add_argparse_args(parser)
    return [a for a in parser._actions if a.option_strings]


def _help(action: argparse.Action) -> str:
    text = (action.help or "") % {**vars(action), "prog": "corpus-chunker"}
    return " ".join(text.split())


def default_text(action: argparse.Action) -> str:
    """How a flag's default is written, in docs/flags.md and in the README's flag table."""
    if _help(action).startswith("Required."):
        return "required"
    if action.default is None:
        return "–"
    if action.default is False:
        return "off"
    if isinstance(action.default, str):
        return f"`{action.default}`"
    if isinstance(action.default, int) and action.default >= 10_000:
        return f"{action.default:,}"
    return str(action.default)


def render() -> str:
    """The whole of docs/flags.md."""
    rows = ["| flag | default | values | meaning |", "|---|---|---|---|"]
    for action in flag_actions():
        flag = action.option_strings[0]
        if isinstance(action, argparse._StoreTrueAction):
            values = "(no value)"
        elif action.choices:
            values = ", ".join(f"`{c}`" for c in action.choices)
        else:
            values = ""
        meaning = _help(action).replace("|", "\\|")
        rows.append(f"| `{flag}` | {default_text(action)} | {values} | {meaning} |")
    return _HEADER + "\n" + "\n".join(rows) + "\n"


def main() -> None:
    with open(FLAGS_MD, "w", encoding="utf-8") as f:
        f.write(render())
    print(f"wrote {os.path.relpath(FLAGS_MD, ROOT)} ({len(flag_actions())} flags)")


if __name__ == "__main__":
    main()
