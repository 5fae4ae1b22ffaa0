"""The development corpus with every corpus folder renamed to a neutral name (c1/, c2/...).

A path header starts with the folder ("postgresql/sql-vacuum.html > ..."): where the folder is
named after the product, a word of the question can match the folder instead of the chunk.
Scored on a copy whose folders name nothing, a header has to earn its tokens with the file
name, title and section path alone. Files are hard links where the file system allows (no
second copy of the corpus), else copies; the question file is rewritten to the new folders.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence


def neutral_names(corpora: Sequence[str]) -> dict[str, str]:
    """corpus folder -> neutral folder, numbered in the order given (corpora.json's)."""
    return {name: f"c{i}" for i, name in enumerate(corpora, 1)}


def neutral_corpus(corpus: str, target: str, names: dict[str, str]) -> None:
    """Rebuild `target` as `corpus` with each top-level folder renamed by `names`."""
    missing = sorted(set(os.listdir(corpus)) - set(names))
    if missing:
        raise ValueError(f"{corpus}: folders {missing} have no neutral name (not in corpora.json)")
    shutil.rmtree(target, ignore_errors=True)
    for name, neutral in names.items():
        source = os.path.join(corpus, name)
        if not os.path.isdir(source):
            raise ValueError(f"{corpus}: no corpus folder {name!r}")
        for folder, _, files in os.walk(source):
            out = os.path.join(target, neutral, os.path.relpath(folder, source))
            os.makedirs(out, exist_ok=True)
            for file in files:
                try:
                    os.link(os.path.join(folder, file), os.path.join(out, file))
                except OSError:
                    shutil.copyfile(os.path.join(folder, file), os.path.join(out, file))


def neutral_questions(questions: str, target: str, names: dict[str, str]) -> None:
    """Write `questions` to `target` with every answer's source under its neutral folder; the
    question texts, ids and halves stay as they are."""
    with open(questions, encoding="utf-8") as f, open(target, "w", encoding="utf-8") as out:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            for answer in record["answers"]:
                folder, _, rest = answer["source"].partition("/")
                if folder not in names:
                    raise ValueError(f"{questions}: {record['id']}: source {answer['source']!r}")
                answer["source"] = f"{names[folder]}/{rest}"
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
