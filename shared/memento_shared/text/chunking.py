"""Structure-preserving markdown chunking and outlines for canonical documents (seed 001 Part 4, DIALECTS `documents`).

Pure functions, no I/O. markdown-it (CommonMark + GFM tables) finds the blocks; every offset is a character offset
into the text as given.

Invariants (tested in tests/unit/test_chunking.py):
- A heading always starts a new chunk, so a chunk belongs to exactly one heading section and its heading path and
  anchor are those of that section.
- Own spans `[start, end)` are non-empty, disjoint and in document order, and every character outside them is
  whitespace: the document is `gap + own + gap + own + ... + gap` with whitespace-only gaps.
- `text == document[start - overlap:end]`: the overlap is the tail of the previous chunk of the same section plus the
  whitespace between them, at most `overlap_tokens` tokens, never starting inside a code block or table.
- `token_estimate == count_tokens(text) <= max_tokens`, except for a chunk that is one code block or table on its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from memento_shared.text.tokenizer import count_tokens

_MD = MarkdownIt("commonmark").enable("table")
_ATOMIC = frozenset({"fence", "code_block", "table"})  # never split (seed: preserveCodeBlocks, preserveTables)
_CONTAINERS = frozenset({"bullet_list", "ordered_list", "list_item", "blockquote"})
# markdown-it numbers lines after turning these into "\n"; splitting the same way keeps offsets in the original text.
_LINE_BREAK = re.compile(r"\r\n?|\n")
# JavaScript's `\s`, so the slug matches the seed's TypeScript regexes character for character.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_SLUG_DROP = re.compile(f"[^a-z0-9{_JS_SPACE}-]")
_SLUG_SPACE = re.compile(f"[{_JS_SPACE}]+")
# How an oversized paragraph is cut, coarsest first: lines, then sentences (seed: splitBlockBySentences), then words.
_TEXT_CUTS = (re.compile(r"\s*\n\s*"), re.compile(r"(?<=[.!?。！？])\s+"), re.compile(r"\s+"))
_SPACE = re.compile(r"\s")


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str  # overlap + own text
    heading_path: list[str]
    anchor: str
    start: int  # own span, excluding the overlap
    end: int
    token_estimate: int  # cl100k tokens of `text`
    overlap: int  # leading characters of `text` repeated from the previous chunk


@dataclass(frozen=True)
class Section:
    anchor: str
    heading_path: list[str]
    level: int  # the markdown heading level, 1..6
    title: str
    start: int  # the heading line
    end: int  # end of the section's last block, subsections included


@dataclass(frozen=True)
class _Block:
    node: SyntaxTreeNode | None  # None: lines no block claims (link reference definitions before the first block)
    start: int
    end: int
    path: tuple[str, ...]
    level: int  # heading level, 0 when not a heading


def section_anchor(heading_path: Sequence[str]) -> str:
    """Seed 001 `generateSectionAnchor`: `h{depth}:{slug}.{slug}...`, or `root` outside every heading."""
    if not heading_path:
        return "root"
    slugs = []
    for heading in heading_path:
        slug = _SLUG_SPACE.sub("-", _SLUG_DROP.sub("", heading.lower()))
        slugs.append(re.sub("-+", "-", slug)[:40])
    return f"h{len(heading_path)}:{'.'.join(slugs)}"


def outline(text: str) -> list[Section]:
    """Every heading of the document, in order, with the span of its section (for canonical.outline/get_section)."""
    blocks, _ = _parse(text)
    sections: list[Section] = []
    open_: list[int] = []  # indexes into `sections` of the headings on the current path
    last_end = 0
    for block in blocks:
        if block.level:
            while open_ and sections[open_[-1]].level >= block.level:
                _close(sections, open_.pop(), last_end)
            path = list(block.path)
            sections.append(Section(section_anchor(path), path, block.level, path[-1], block.start, block.end))
            open_.append(len(sections) - 1)
        last_end = block.end
    for index in open_:
        _close(sections, index, last_end)
    return sections


def chunk_markdown(
    text: str,
    *,
    target_tokens: int = 600,
    max_tokens: int = 800,
    overlap_tokens: int = 60,
    doc_slug: str | None = None,
) -> list[Chunk]:
    """Split a markdown document into chunks along its heading sections (seed 001 Part 4).

    `doc_slug` changes nothing: the seed's anchors have no document part. It is accepted so callers can pass it.
    """
    if not 0 < target_tokens <= max_tokens or not 0 <= overlap_tokens < target_tokens:
        raise ValueError("need 0 < target_tokens <= max_tokens and 0 <= overlap_tokens < target_tokens")
    blocks, line_starts = _parse(text)
    sections: list[tuple[tuple[str, ...], list[tuple[int, int, bool]]]] = []
    for block in blocks:
        if block.level or not sections:
            sections.append((block.path, []))
        sections[-1][1].extend(_units(text, line_starts, block.node, block.start, block.end, max_tokens))
    chunks: list[Chunk] = []
    for path, units in sections:
        _pack(text, path, units, chunks, target_tokens, max_tokens, overlap_tokens)
    return chunks


def _parse(text: str) -> tuple[list[_Block], list[int]]:
    """Top-level blocks with their heading paths; each block owns the unclaimed lines up to the next one."""
    line_starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]
    nodes = SyntaxTreeNode(_MD.parse(text)).children
    bounds = [line_starts[node.map[0]] for node in nodes] + [len(text)]
    blocks: list[_Block] = []
    preamble = _trim(text, 0, bounds[0])
    if preamble:
        blocks.append(_Block(None, *preamble, (), 0))
    stack: list[tuple[int, str]] = []
    for node, lo, hi in zip(nodes, bounds, bounds[1:], strict=False):
        span = _trim(text, lo, hi)
        if span is None:
            continue
        level = int(node.tag[1]) if node.type == "heading" else 0
        if level:
            # The seed's comment, "pop headings at same or higher level", by heading level: its code compares the
            # stack's depth instead, which nests sibling `##` sections inside each other in a document with no `#`.
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, _plain(node).strip()))
        blocks.append(_Block(node, *span, tuple(title for _, title in stack), level))
    return blocks, line_starts


def _close(sections: list[Section], index: int, end: int) -> None:
    s = sections[index]
    sections[index] = Section(s.anchor, s.heading_path, s.level, s.title, s.start, end)


def _plain(node: SyntaxTreeNode) -> str:
    """A heading's text as a reader sees it: markup dropped, code spans and image alt text kept."""
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return " "
    return "".join(_plain(child) for child in node.children)


def _trim(text: str, lo: int, hi: int) -> tuple[int, int] | None:
    """Drop blank lines before and whitespace after a span, keeping its first line's indentation (code, lists)."""
    body = text[lo:hi]
    stripped = body.lstrip()
    if not stripped:
        return None
    first = hi - len(stripped)
    line_start = max(text.rfind("\n", lo, first), text.rfind("\r", lo, first)) + 1
    return max(lo, line_start), lo + len(body.rstrip())


def _units(
    text: str, line_starts: list[int], node: SyntaxTreeNode | None, lo: int, hi: int, maximum: int
) -> list[tuple[int, int, bool]]:
    """Pieces `(start, end, atomic)` of a block: whole if it fits or may not be split, else cut between children."""
    if node is not None and node.type in _ATOMIC:
        return [(lo, hi, True)]
    if count_tokens(text[lo:hi]) <= maximum:
        return [(lo, hi, False)]
    kids = [kid for kid in node.children if kid.map] if node is not None and node.type in _CONTAINERS else []
    if not kids:
        return [(start, end, False) for start, end in _split_text(text, lo, hi, maximum, 0)]
    # Each child takes whole lines up to the next child; the first also takes its parent's marker (`- `, `> `).
    bounds = [lo] + [min(max(line_starts[kid.map[0]], lo), hi) for kid in kids[1:]] + [hi]
    units: list[tuple[int, int, bool]] = []
    for kid, start, end in zip(kids, bounds, bounds[1:], strict=False):
        span = _trim(text, start, end) if end > start else None
        if span:
            units.extend(_units(text, line_starts, kid, *span, maximum))
    return units


def _split_text(text: str, lo: int, hi: int, maximum: int, depth: int) -> list[tuple[int, int]]:
    if count_tokens(text[lo:hi]) <= maximum:
        return [(lo, hi)]
    if depth == len(_TEXT_CUTS):
        # One word longer than the cap: cut by characters. cl100k spends at most one token per UTF-8 byte, and a
        # character is at most four bytes, so `maximum // 4` characters always fit.
        step = max(1, maximum // 4)
        return [(start, min(start + step, hi)) for start in range(lo, hi, step)]
    pieces, start = [], lo
    for match in _TEXT_CUTS[depth].finditer(text, lo, hi):
        if match.start() > start:
            pieces.append((start, match.start()))
        start = match.end()
    if hi > start:
        pieces.append((start, hi))
    return [piece for a, b in pieces for piece in _split_text(text, a, b, maximum, depth + 1)]


def _pack(
    text: str,
    path: tuple[str, ...],
    units: list[tuple[int, int, bool]],
    chunks: list[Chunk],
    target: int,
    maximum: int,
    overlap: int,
) -> None:
    """Greedy packing of one section's units: close a chunk once it reaches `target` or the next unit would pass
    `maximum`. Token counts are of the real text (overlap included), not sums, so the cap holds exactly."""

    def size(a: int, b: int) -> int:
        return count_tokens(text[a:b])

    def emit() -> None:
        body = text[begin:last]
        chunks.append(
            Chunk(len(chunks), body, list(path), section_anchor(path), first, last, count_tokens(body), first - begin)
        )

    begin = first = last = -1
    for start, end, _atomic in units:
        if first >= 0 and (size(begin, last) >= target or size(begin, end) > maximum):
            emit()
            begin, first = _overlap_start(text, units, first, last, start, overlap), -1
        if first < 0:
            first = start
            if begin < 0 or size(begin, end) > maximum:
                begin = start  # drop the overlap rather than pass the cap
        last = end
    if first >= 0:
        emit()


def _overlap_start(text: str, units: list[tuple[int, int, bool]], lo: int, hi: int, nxt: int, budget: int) -> int:
    """Where the next chunk's text begins: inside the previous chunk's own span [lo, hi), or at `nxt` for none."""
    if budget == 0:
        return nxt
    # Smallest start whose text up to `nxt` fits the budget; tokens of a suffix almost always shrink with it, and
    # the loop below makes sure of the budget where they do not.
    a, b = lo, hi
    while a < b:
        mid = (a + b) // 2
        if count_tokens(text[mid:nxt]) <= budget:
            b = mid
        else:
            a = mid + 1
    while a < nxt:
        for start, end, atomic in units:
            if atomic and start < a < end:
                a = end  # half a code fence or table would change how the rest of the chunk renders
        if lo < a < hi and not text[a - 1].isspace() and not text[a].isspace():
            space = _SPACE.search(text, a, hi)  # begin at the next word; text without spaces (CJK) keeps the cut
            if space:
                a = space.end()
        while a < nxt and text[a].isspace():
            a += 1
        # Dropping a leading space can merge tokens into more ("설" vs " 설"): move on until the budget holds.
        if count_tokens(text[a:nxt]) <= budget:
            break
        a += 1
    return a


def chunk_text(heading_path: Sequence[str], text: str) -> str:
    """What the model reads for a chunk embedded alone (offline, seed 001 Part 3): its heading path ahead of its text,
    since a chunk alone loses the context its headings give. The embedder and memory.search's fresh chunks both."""
    return " > ".join(heading_path) + "\n\n" + text if heading_path else text
