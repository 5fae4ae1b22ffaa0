"""Text printed to a terminal has its control characters escaped (issue 22, N12): document
text and file names come from the corpus, and ESC]0;...BEL retitles a window, ESC[2J clears
the screen. One helper, `commands.terminal.for_terminal`, for `inspect --show`, the
summaries and the reject tables."""

from __future__ import annotations

import io

from commands.inspect import Run, format_table, show_document

EVIL_NAME = "docs/\x1b[31mred\x1b[0m.txt"
EVIL_TEXT = "Title\x1b]0;pwned\x07 then \x1b[2J a cleared screen.\n\tTabbed line \x9b and more.\n"


class _Run(Run):
    def texts(self, doc_ids):
        return {"d1": EVIL_TEXT}


def _run() -> Run:
    doc = {"doc_id": "d1", "source": EVIL_NAME, "doc_type": "text"}
    chunk = {
        "doc_id": "d1",
        "chunk_id": "c1",
        "chunk_index": 0,
        "start_char": 0,
        "end_char": len(EVIL_TEXT),
        "token_count": 20,
        "section_path": ["\x1b[1mBold"],
        "context": "ctx\x07",
    }
    return _Run("out", {}, None, [chunk], [doc], [])


def test_show_escapes_the_documents_control_characters():
    stream = io.StringIO()
    show_document(_run(), "d1", stream)
    out = stream.getvalue()
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "\\x1b]0;pwned\\x07" in out and "\\x1b[2J" in out and "\\x1b[31mred" in out
    assert "\n\tTabbed line" in out  # the text's own lines and tabs are kept


def test_a_table_cell_is_escaped_newlines_too():
    table = format_table(
        ["stage", "reason", "count", "for example"],
        [["read", "too_large", 1, "odd names/a..b\nnew\x1b[2Jline.txt"]],
    )
    assert "\x1b" not in table and len(table.splitlines()) == 2
    assert "a..b\\x0anew\\x1b[2Jline.txt" in table


def test_for_terminal_escapes_controls_and_keeps_text():
    from commands.terminal import for_terminal

    assert for_terminal("é 中文 🙂\n\tx") == "é 中文 🙂\n\tx"
    assert for_terminal("a\x00b\x7fc\u202ed") == "a\\x00b\\x7fc\\u202ed"
    assert for_terminal("a\nb", keep_lines=False) == "a\\x0ab"
