"""Saved web pages read with selectolax (lexbor): the main content, its headings, lists and
tables.

The main content is the page's `<main>`, else its `<article>`, else its body. Navigation,
headers, footers, asides, forms, scripts and styles are boilerplate and left out silently.
Text a visitor cannot see is hostile (a planted instruction for a model) and is left out
and reported with its place: elements that are `hidden`, `aria-hidden`, styled
`display:none`, `visibility:hidden`, zero-size, transparent or moved off-screen (inline, or
through a class or id a `<style>` block hides that way), and HTML comments.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from guardrag.core.kb.blocks import Block, Document, Dropped, clean
from guardrag.core.kb.entries import IngestError

_BOILERPLATE = (
    "script, style, noscript, template, nav, header, footer, aside, form, button, iframe, "
    "svg, canvas, select, [role=navigation], [role=banner], [role=contentinfo], "
    "[role=complementary], [role=search]"
)
#: Declarations that make text invisible to a visitor.
_HIDING = re.compile(
    r"display\s*:\s*none|visibility\s*:\s*hidden|opacity\s*:\s*0(?:\.0+)?\s*(?:;|$)"
    r"|font-size\s*:\s*0(?:\.0+)?(?:px|pt|em|rem|%)?\s*(?:;|$)"
    r"|(?:left|top|text-indent|margin-left)\s*:\s*-\d{3,}"
    r"|clip\s*:\s*rect\(\s*0|(?:width|height)\s*:\s*0(?:px)?\s*;.*overflow\s*:\s*hidden",
    re.I,
)
_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_SIMPLE_SELECTOR = re.compile(r"^[.#][A-Za-z_][\w-]*$")
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCK_TAGS = {"p", "li", "tr", "dt", "dd", "blockquote", "pre", "figcaption", "caption"}


def read_html(path: Path) -> Document:
    """The page's main content as blocks under their headings; hidden text reported."""
    from selectolax.lexbor import LexborHTMLParser  # lazy: only HTML ingest pays for it

    try:
        raw = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    tree = LexborHTMLParser(raw)
    document = Document(str(path), "")
    _drop_comments(tree, path, document)
    hidden_selectors = _hiding_selectors(tree)
    for node in tree.css(_BOILERPLATE):
        node.decompose()
    root = tree.css_first("main") or tree.css_first("[role=main]") or tree.css_first("article")
    root = root or tree.body
    if root is None:
        raise IngestError(f"{path}: no <body> in this HTML page")
    _drop_hidden(root, hidden_selectors, path, document)
    _walk(root, path, document.blocks, [])
    heading = next((b.text for b in document.blocks if b.kind == "heading"), "")
    title_node = tree.css_first("title")
    document.title = heading or (clean(title_node.text()) if title_node else "") or path.stem
    return document


def _drop_comments(tree: Any, path: Path, document: Document) -> None:
    """Comments are never shown; any with text in them is reported."""
    nodes = tree.root.traverse(include_text=True) if tree.root is not None else []
    for node in [n for n in nodes if n.tag == "-comment"]:
        text = clean(node.comment_content or "")
        if text and not text.startswith(("[if", "<![endif]")):  # IE conditional comments
            document.dropped.append(Dropped(f"{path}: <!-- -->", "HTML comment dropped", text))
        node.decompose()


def _hiding_selectors(tree: Any) -> list[str]:
    """Class and id selectors that a `<style>` block hides (`.x { display: none }`)."""
    found: list[str] = []
    for style in tree.css("style"):
        for selectors, body in _RULE.findall(style.text()):
            if _HIDING.search(body):
                found += [
                    s.strip() for s in selectors.split(",") if _SIMPLE_SELECTOR.match(s.strip())
                ]
    return found


def _drop_hidden(root: Any, selectors: list[str], path: Path, document: Document) -> None:
    query = ", ".join(["[hidden]", "[aria-hidden=true]", "[style]", *selectors])
    for node in root.css(query):
        style = node.attributes.get("style") or ""
        if "style" in node.attributes and not (
            "hidden" in node.attributes
            or node.attributes.get("aria-hidden") == "true"
            or _HIDING.search(style)
            or any(node.css_matches(s) for s in selectors)
        ):
            continue
        text = clean(node.text(separator=" "))
        if text:
            where = f"{path}: <{node.tag}{_describe(node)}>"
            document.dropped.append(Dropped(where, "hidden text dropped", text))
        node.decompose()


def _describe(node: Any) -> str:
    attrs = node.attributes
    for name in ("id", "class", "style"):
        if attrs.get(name):
            return f' {name}="{str(attrs[name])[:40]}"'
    return ""


def _walk(node: Any, path: Path, blocks: list[Block], loose: list[str]) -> None:
    """Blocks in document order; text directly inside containers becomes a paragraph."""
    for child in node.iter(include_text=True):
        tag = child.tag
        if tag == "-text":
            loose.append(child.text(deep=False))
            continue
        if tag in _HEADINGS or tag in _BLOCK_TAGS or tag == "table":
            _flush(loose, path, blocks)
        if tag in _HEADINGS:
            text = clean(child.text(separator=" "))
            if text:
                blocks.append(Block("heading", text, _HEADINGS[tag], None, f"{path}: <{tag}>"))
        elif tag == "tr":
            cells = [clean(c.text(separator=" ")) for c in child.css("th, td")]
            if any(cells):
                blocks.append(Block("table_row", " | ".join(cells), 0, None, f"{path}: <tr>"))
        elif tag == "li":
            nested = [n for n in child.iter() if n.tag in ("ul", "ol")]
            own = clean(
                " ".join(
                    n.text(deep=True, separator=" ")
                    for n in child.iter(include_text=True)
                    if n.tag not in ("ul", "ol")
                )
            )
            if own:
                blocks.append(Block("list_item", own, 0, None, f"{path}: <li>"))
            for sub in nested:
                _walk(sub, path, blocks, [])
        elif tag in _BLOCK_TAGS:
            text = clean(child.text(separator=" "))
            if text:
                blocks.append(Block("paragraph", text, 0, None, f"{path}: <{tag}>"))
        elif tag in ("br",):
            loose.append("\n")
        else:
            _walk(child, path, blocks, loose)
            if tag in ("div", "section", "ul", "ol", "table", "dl"):
                _flush(loose, path, blocks)
    if node.tag in ("body", "main", "article"):
        _flush(loose, path, blocks)


def _flush(loose: list[str], path: Path, blocks: list[Block]) -> None:
    text = clean(" ".join(loose))
    loose.clear()
    if text:
        blocks.append(Block("paragraph", text, 0, None, f"{path}"))
