"""trafilatura's Markdown as text to chunk: every fence on a line of its own.

trafilatura 2.3.1 (xml.py) glues a code block to the text before it when the ``<pre>`` sits in
a list item or a definition (``Example usage: `````, ``- `````): CommonMark opens no fence
there, the code is read as paragraph text, and its closing fence opens a code block that
swallows what follows. `fences_alone` puts every such fence on a line of its own.
"""

from __future__ import annotations

import re

__all__ = ["fences_alone"]

# a line's indentation and list or block quote markers: what precedes its content
_CONTAINER_MARKERS = re.compile(r"(?:[ \t]*(?:[-+*]|\d{1,9}[.)])(?:[ \t]+|$)|[ \t]*>[ \t]?)*[ \t]*")
_FENCE_LINE = re.compile(r"[ \t]*(`{3,})[ \t]*$")  # what trafilatura writes, and a closing fence
_OPENING_FENCE = re.compile(r"[ \t]*(`{3,})[^`]*$")  # with an info string, if any
# an opening fence glued to the text before it: trafilatura writes "```" and a newline
_GLUED_OPENING = re.compile(r"^(.*?\S)[ \t]*(`{3,})$")


def _closing_run(line: str, start: int, length: int) -> int:
    """End of the first run of exactly `length` backticks in `line` from `start`, or -1."""
    for m in re.finditer(r"`+", line[start:]):
        if len(m.group()) == length:
            return start + m.end()
    return -1


def _opening_fence(line: str) -> tuple[str, str] | None:
    """(text before, fence) when `line` ends with an opening fence glued to text, else None.

    A run that closes an inline code span of the same line (```` ``a``b``` ````) is no fence:
    the line's code spans are stepped over first, as CommonMark reads them.
    """
    m = _GLUED_OPENING.match(line)
    if m is None:
        return None
    before, fence = m.group(1), m.group(2)
    i = 0
    while i < len(before):
        if before[i] == "\\":
            i += 2
            continue
        if before[i] == "`":
            run = len(before[i:]) - len(before[i:].lstrip("`"))
            end = _closing_run(line, i + run, run)
            if end > len(before):
                return None  # the final run closes a span opened before it
            i = end if end > 0 else i + run
            continue
        i += 1
    return before, fence


def fences_alone(markdown: str) -> str:
    """Every opening fence trafilatura glued to text (``Example usage: `````) on its own line.

    A ``<pre>`` in a list item or a definition comes out as the text before it, a space and
    the fence: CommonMark opens no fence mid-line, so the code was read as paragraph text and
    its closing fence opened a code block that swallowed what followed. The fence goes to the
    start of the next line, where it opens a code block at the top level (trafilatura writes
    the code's lines unindented, so it could not continue the list item anyway); a line that
    held only list markers before the fence (``- `````, a definition that starts with code)
    becomes the fence alone. Only a fence that a later line closes is moved.

    The list a code block broke out of goes on after it (Javadoc's ``    - Parameters:``
    under each example) at the same indentation, which after a top-level block reads as an
    indented code block: the lines up to the next blank line lose the first one's
    indentation when it is four spaces or more, so they are a list again.
    """
    if "```" not in markdown:
        return markdown
    lines = markdown.split("\n")
    last_line_of: dict[str, int] = {}  # fence -> the last line that is that fence alone
    for i, line in enumerate(lines):
        if m := _FENCE_LINE.match(line):
            last_line_of[m.group(1)] = i
    out: list[str] = []
    fence: str | None = None  # the fence of the code block we are in
    after_block = False  # the line before closed a code block at the margin
    margin = 0  # indentation taken off the lines after a code block, up to a blank line
    for i, line in enumerate(lines):
        if fence is not None:
            out.append(line)
            m = _FENCE_LINE.match(line)
            if m and line == line.lstrip() and m.group(1).startswith(fence):
                fence, after_block = None, True
            continue
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip():
            margin = 0
        elif after_block:
            margin = indent if indent >= 4 else 0
        after_block = False
        line = line[min(margin, indent) :]
        m = _OPENING_FENCE.match(line)
        if m:
            fence = m.group(1)
            out.append(line)
            continue
        glued = _opening_fence(line)
        if glued is None or last_line_of.get(glued[1], -1) <= i:
            out.append(line)
            continue
        before, fence = glued
        if _CONTAINER_MARKERS.fullmatch(before + " "):
            out.append(fence)  # only a list marker before it: the fence alone
        else:
            out.extend((before, fence))
    return "\n".join(out)
