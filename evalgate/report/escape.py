"""Escape untrusted text (model answers, dataset fields, reasons) for GitHub-flavoured Markdown.

Every function is pure. Every context first drops the characters that have no business in a report
(``strip_controls``): NUL and the other C0/C1 control characters except tab and line breaks, and the
bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C) that can make text
display in another order than it reads ("Trojan Source"). The contexts are:

* prose: HTML neutralised (``&``, ``<``, ``>``), Markdown inline syntax backslash-escaped, ``@mentions``
  defused with a zero-width joiner (U+200D) after the ``@``, issue auto-links (``#123``, ``GH-123``)
  optionally defused, bare URLs (``http://``, ``https://``, ``ftp://``, ``www.``) shown as inline code so
  GitHub does not turn them into links, a line-leading ``::`` (workflow command) broken with a
  zero-width space;
* table cells: prose rules, plus ``|`` → ``\\|`` and newlines → ``<br>``;
* inline code: a backtick run longer than any inside the text (HTML and mentions are inert in code);
* fenced blocks: a fence of ``max(3, longest backtick run + 1)`` backticks, so the text cannot close it
  (content is verbatim: wrap Markdown in ``github.commands.stop_commands`` before printing it to a log);
* HTML (``<summary>``): entities for ``& < > " '``, mentions defused.
"""

from __future__ import annotations

import re

ZWJ = "\u200d"
ELLIPSIS = "…"

_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_ISSUE_REF = re.compile(r"#(?=\d)")
_GH_REF = re.compile(r"(?<![A-Za-z0-9])(GH)(?=-\d)", re.IGNORECASE)
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Characters dropped from every report: C0/C1 controls except tab, the line breaks (LF, VT, FF, CR,
U+001C–U+001E, U+0085) and the bidirectional formatting controls."""
_BARE_URL = re.compile(r"(?i)(?:(?:https?|ftp)://|www\.)[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]}*_~]")
"""What GitHub would turn into a link by itself (GFM autolinks, extended)."""
_MD_INLINE = re.compile(r"([\\`*_\[\]~!])")
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_BACKTICK_RUN = re.compile(r"`+")
_BLOCK_START = re.compile(r"^(\s*)(?:(#(?=#*(?:\s|$))|[+\-=])|(\d+)([.)]))")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (≥ code points): a conservative count for GitHub's character limits."""
    return len(text.encode("utf-16-le")) // 2


def cut_utf16(text: str, limit: int) -> str:
    """The longest prefix of ``text`` that is at most ``limit`` UTF-16 code units (never splits a pair)."""
    cut = text[: max(0, limit)]
    while utf16_len(cut) > limit:
        cut = cut[: len(cut) - max(1, (utf16_len(cut) - limit) // 2)]
    return cut


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters of content, then append ``… (truncated, N chars)``.

    N is the original length in characters. Text within the limit is returned unchanged.
    """
    if limit < 0:
        raise ValueError("limit must be >= 0")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}{ELLIPSIS} (truncated, {len(text)} chars)"


def strip_controls(text: str) -> str:
    """``text`` without NUL, the other control characters (tab and line breaks kept) and the bidirectional
    formatting controls (see the module docstring)."""
    return _CONTROLS.sub("", text)


def defuse_mentions(text: str, *, issue_links: bool = False) -> str:
    """Insert U+200D after ``@`` (and, unless ``issue_links``, after ``#`` and ``GH`` before ``-`` and
    digits) so nobody is pinged and no issue is linked."""
    text = _MENTION.sub("@" + ZWJ, text)
    if issue_links:
        return text
    return _GH_REF.sub(lambda m: m.group(1) + ZWJ, _ISSUE_REF.sub("#" + ZWJ, text))


def escape_html(text: str) -> str:
    """HTML-escape for element content and attribute values (``& < > " '``), mentions defused."""
    text = defuse_mentions(strip_controls(text)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;").replace("'", "&#39;")


def one_line(text: str, separator: str = " ") -> str:
    """Join all lines of ``text`` with ``separator`` (every Unicode line break counts)."""
    return _LINE_BREAKS.sub(separator, text)


def escape_prose(text: str, *, issue_links: bool = False, single_line: bool = True) -> str:
    """Escape text for Markdown prose: HTML inert, inline syntax (links, images, emphasis, code) literal.

    With ``single_line`` the text is folded onto one line, so it cannot start a heading, list or table.
    Bare URLs become inline code (shown, not linked).
    """
    text = strip_controls(text)
    if single_line:
        text = one_line(text).strip()
    parts = _BARE_URL.split(text)
    if len(parts) > 1:  # URLs: code spans between the escaped stretches of prose
        urls = _BARE_URL.findall(text)
        pieces = [_escape_inline(parts[0], issue_links)]
        for url, rest in zip(urls, parts[1:], strict=True):
            pieces += [inline_code(url), _escape_inline(rest, issue_links)]
        text = "".join(pieces)
    else:
        text = _escape_inline(text, issue_links)
    if single_line:
        return _defuse_block_start(one_line(text).strip())
    return "\n".join(_defuse_block_start(line) for line in _LINE_BREAKS.split(text))


def _escape_inline(text: str, issue_links: bool) -> str:
    """Mentions defused, HTML neutralised, Markdown inline syntax backslash-escaped."""
    text = defuse_mentions(text, issue_links=issue_links)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_INLINE.sub(r"\\\1", text)


def escape_cell(text: object, *, issue_links: bool = False) -> str:
    """Escape a value for a GFM table cell: prose rules, ``|`` → ``\\|``, newlines → ``<br>``."""
    lines = [escape_prose(line, issue_links=issue_links) for line in _LINE_BREAKS.split(str(text))]
    return "<br>".join(line.replace("|", "\\|") for line in lines)


def inline_code(text: object, *, in_table: bool = False) -> str:
    """Wrap ``text`` in a code span whose backtick run is longer than any run inside it.

    Lines are folded to one; in a table, ``|`` becomes ``\\|`` (GFM splits cells before code spans).
    """
    body = one_line(strip_controls(str(text)))
    ticks = "`" * (_longest_backtick_run(body) + 1)
    if body.startswith("`") or body.endswith("`") or (body.startswith(" ") and body.endswith(" ") and body.strip()):
        body = f" {body} "
    if in_table:
        body = body.replace("|", "\\|")
    return f"{ticks}{body}{ticks}" if body else "` `"


def fenced(text: str, language: str = "") -> str:
    """A fenced code block that ``text`` cannot close: fence = ``max(3, longest backtick run + 1)``."""
    body = _LINE_BREAKS.sub("\n", strip_controls(text))
    fence = "`" * max(3, _longest_backtick_run(body) + 1)
    lang = re.sub(r"[^A-Za-z0-9_+-]", "", language)
    return f"{fence}{lang}\n{body}\n{fence}"


def link_target(url: str) -> str:
    """Make a URL safe inside ``[text](url)``: only http(s), with spaces, parentheses and ``<>`` encoded."""
    if not re.match(r"^https?://", url, re.I):
        return "#"
    return (
        url.replace(" ", "%20").replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")
    )


def _defuse_block_start(line: str) -> str:
    """Backslash-escape a leading heading/list/setext marker so the line stays a paragraph; break a
    leading ``::`` with a zero-width space."""
    def repl(m: re.Match[str]) -> str:
        if m.group(2):
            return f"{m.group(1)}\\{m.group(2)}"
        return f"{m.group(1)}{m.group(3)}\\{m.group(4)}"

    line = _BLOCK_START.sub(repl, line, count=1)
    stripped = line.lstrip()
    if stripped.startswith("::"):  # a workflow command if this Markdown is ever echoed to the log
        line = line[: len(line) - len(stripped)] + ":\u200b" + stripped[1:]
    return line


def _longest_backtick_run(text: str) -> int:
    return max((len(m.group(0)) for m in _BACKTICK_RUN.finditer(text)), default=0)
