"""The generator zoo's file selection (eval/zoo.py, eval/zoo.json, docs/structure.md)."""

import os

from eval.zoo import chosen_files


def _tree(root: str, files: list[str]) -> None:
    for rel in files:
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("<html></html>")


def test_a_zoo_glob_crosses_folders_as_zoo_json_says(tmp_path):
    # mkdocs keeps its pages in folders (user-guide/index.html): with shell globs, where `*`
    # stays within one folder, `html/*.html` took 2 of mkdocs' 22 pages
    _tree(
        str(tmp_path),
        [
            "doc/html/index.html",
            "doc/html/404.html",
            "doc/html/user-guide/index.html",
            "doc/html/user-guide/cli.html",
            "doc/html/about/license.html",
            "doc/other/x.html",
        ],
    )
    entry = {"files": ["doc/html/*.html"], "exclude": ["*/404.html"]}
    assert chosen_files(str(tmp_path), entry) == [
        "doc/html/about/license.html",
        "doc/html/index.html",
        "doc/html/user-guide/cli.html",
        "doc/html/user-guide/index.html",
    ]
    assert chosen_files(str(tmp_path), {**entry, "take": 2}) == [
        "doc/html/about/license.html",
        "doc/html/user-guide/cli.html",
    ]


def test_a_page_that_only_redirects_is_no_page_of_the_zoo(tmp_path):
    _tree(str(tmp_path), ["html/a.html", "html/b.html"])
    with open(tmp_path / "html" / "old.html", "w") as f:  # texi2any's stub of a renamed node
        f.write(
            '<html><head><meta http-equiv="Refresh" content="0; url=a.html#x"></head>'
            '<body><p>The node you are looking for is at <a href="a.html#x">x</a>.</p></body>'
            "</html>"
        )
    assert chosen_files(str(tmp_path), {"files": ["html/*.html"]}) == [
        "html/a.html",
        "html/b.html",
    ]
