"""Pages that only redirect: rejected with the reason `redirect` and their target, not chunked
as "Redirecting..." (real stubs from the zoo's rust-doc 1.63 and mkdocs 1.4.2 packages)."""

import html

import pytest
from lxml.html import document_fromstring

from schemas.records import RawDocument
from transforms.ingest.extraction import ExtractError, extract_document
from transforms.ingest.html import html_to_markdown, redirect_target

# rust-doc: /usr/share/doc/rust-doc/html/std/net/ip/struct.Ipv6Addr.html, as shipped
RUSTDOC_STUB = """<!DOCTYPE html>
<html lang="en">
<head>
    <meta http-equiv="refresh" content="0;URL=../../../std/net/struct.Ipv6Addr.html">
    <title>Redirection</title>
</head>
<body>
    <p>Redirecting to <a href="../../../std/net/struct.Ipv6Addr.html">../../../std/net/struct.Ipv6Addr.html</a>...</p>
    <script>location.replace("../../../std/net/struct.Ipv6Addr.html" + location.search + location.hash);</script>
</body>
</html>
"""  # noqa: E501

# mkdocs: /usr/share/doc/mkdocs/html/user-guide/plugins.html (mkdocs-redirects)
MKDOCS_STUB = """<!doctype html>
<html lang="en">
<head>
    <meta charset="utf-8">
    <title>Redirecting...</title>
    <link rel="canonical" href="../dev-guide/plugins.html">
    <meta name="robots" content="noindex">
    <script>var anchor=window.location.hash.substr(1);location.href="../dev-guide/plugins.html"+(anchor?"#"+anchor:"")</script>
    <meta http-equiv="refresh" content="0; url=../dev-guide/plugins.html">
</head>
<body>
Redirecting...
</body>
</html>
"""  # noqa: E501


def _extract(html: str):
    return extract_document(RawDocument("site/page.html", "id", html.encode()), html_to_markdown)


@pytest.mark.parametrize(
    ("page", "target"),
    [
        (RUSTDOC_STUB, "../../../std/net/struct.Ipv6Addr.html"),
        (MKDOCS_STUB, "../dev-guide/plugins.html"),
    ],
)
def test_a_page_that_only_redirects_is_rejected_naming_its_target(page: str, target: str):
    with pytest.raises(ExtractError) as e:
        _extract(page)
    assert e.value.reason == "redirect" and target in str(e.value)


def test_a_page_with_content_or_a_slow_refresh_is_read():
    words = " ".join(f"word{i}" for i in range(120))  # well over 500 characters
    body = f"<body><main><h1>News</h1><p>{words}</p></main></body>"
    moved = f'<html><head><meta http-equiv="Refresh" content="0; url=new.html"></head>{body}'
    assert "word119" in _extract(moved).text  # it says more than where it went
    reload = '<html><head><meta http-equiv="refresh" content="300"></head><body><p>x</p></body>'
    assert html_to_markdown(reload).redirect is None  # a reload, no target
    later = '<html><head><meta http-equiv="refresh" content="60;url=a.html"></head><body>x</body>'
    assert html_to_markdown(later).redirect is None  # a minute: a page to read first


@pytest.mark.parametrize(
    ("content", "target"),
    [
        ("0;URL=a.html", "a.html"),
        ("0; url='b.html'", "b.html"),
        ('1, URL="c.html"', "c.html"),
        ("2;d.html", "d.html"),
        ("0", None),
        ("0;url=", None),
        ("soon;url=e.html", None),
    ],
)
def test_the_refresh_content_is_read_as_browsers_read_it(content: str, target: str | None):
    attribute = html.escape(content, quote=True)
    page = document_fromstring(
        f'<html><head><meta http-equiv="REFRESH" content="{attribute}"></head><body>x</body></html>'
    )
    assert redirect_target(page) == target
