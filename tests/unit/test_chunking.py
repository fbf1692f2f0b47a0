"""Structure-preserving markdown chunking (seed 001 Part 4): examples, then properties over generated documents.

The tiling rule under test: each chunk's own span [start, end) is non-empty, the spans are disjoint and in document
order, and every character outside all of them is whitespace. So every non-whitespace character of the document lies
in exactly one chunk's own span, and `chunk.text == doc[chunk.start - chunk.overlap:chunk.end]`.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memento_shared.text.chunking import chunk_markdown, outline, section_anchor
from memento_shared.text.tokenizer import count_tokens

SENTENCE = "The refresh token rotates on every use and the old one is revoked at once."


def paragraph(sentences: int) -> str:
    return " ".join(f"{SENTENCE[:-1]} number {i}." for i in range(sentences))


def test_seed_anchor_examples_and_slug_rules():
    assert section_anchor(["App Spec", "Auth", "Token Refresh"]) == "h3:app-spec.auth.token-refresh"
    assert section_anchor(["Implementation Plan"]) == "h1:implementation-plan"
    assert section_anchor([]) == "root"
    # lower-case, drop all but [a-z0-9 whitespace -], whitespace runs to "-", "-" runs to one, 40 characters.
    assert section_anchor(["Token Refresh (v2) — Notes!!"]) == "h1:token-refresh-v2-notes"
    assert section_anchor(["A -- b"]) == "h1:a-b"
    assert section_anchor(["x" * 50 + " y"]) == "h1:" + "x" * 40


def test_nested_headings_give_paths_anchors_and_outline():
    doc = "# App Spec\n\nIntro.\n\n## Auth\n\nLogin.\n\n### Token Refresh\n\nRotate.\n\n## Storage\n\nRows.\n"
    chunks = chunk_markdown(doc)
    assert [(c.heading_path, c.anchor) for c in chunks] == [
        (["App Spec"], "h1:app-spec"),
        (["App Spec", "Auth"], "h2:app-spec.auth"),
        (["App Spec", "Auth", "Token Refresh"], "h3:app-spec.auth.token-refresh"),
        (["App Spec", "Storage"], "h2:app-spec.storage"),
    ]
    assert chunks[2].text == "### Token Refresh\n\nRotate." and chunks[2].overlap == 0
    sections = outline(doc)
    assert [(s.anchor, s.level, s.title) for s in sections] == [
        ("h1:app-spec", 1, "App Spec"),
        ("h2:app-spec.auth", 2, "Auth"),
        ("h3:app-spec.auth.token-refresh", 3, "Token Refresh"),
        ("h2:app-spec.storage", 2, "Storage"),
    ]
    assert doc[sections[1].start : sections[1].end] == "## Auth\n\nLogin.\n\n### Token Refresh\n\nRotate."
    assert sections[0].end == len(doc.rstrip())


def test_heading_levels_not_depth_decide_nesting():
    # Siblings stay siblings in a document with no `#`, and a skipped level still nests one step down.
    doc = "## One\n\na\n\n## Two\n\nb\n\n#### Deep\n\nc\n\n### Mid\n\nd\n\n# Top\n\ne\n"
    assert [(c.heading_path, c.anchor) for c in chunk_markdown(doc)] == [
        (["One"], "h1:one"),
        (["Two"], "h1:two"),
        (["Two", "Deep"], "h2:two.deep"),
        (["Two", "Mid"], "h2:two.mid"),
        (["Top"], "h1:top"),
    ]
    assert [s.level for s in outline(doc)] == [2, 2, 4, 3, 1]


def test_heading_titles_are_plain_text():
    doc = "# The `token` **refresh** [flow](http://example.com/x)\n\ntext\n\nSetext Title\n============\n"
    assert [s.title for s in outline(doc)] == ["The token refresh flow", "Setext Title"]
    assert outline(doc)[0].anchor == "h1:the-token-refresh-flow"


def test_code_fence_longer_than_max_stays_whole():
    fence = "```python\n" + "\n".join(f"value_{i} = compute(token_{i}, refresh={i})" for i in range(200)) + "\n```"
    doc = f"# Code\n\nBefore.\n\n{fence}\n\nAfter.\n"
    chunks = chunk_markdown(doc)
    big = [c for c in chunks if c.token_estimate > 800]
    assert len(big) == 1 and big[0].text == fence and big[0].overlap == 0
    assert [c.text for c in chunks] == ["# Code\n\nBefore.", fence, "After."]
    assert all(c.heading_path == ["Code"] for c in chunks)


def test_fence_inside_an_oversized_list_stays_whole():
    fence = "  ```sh\n" + "\n".join(f"  echo {i} step of the install" for i in range(40)) + "\n  ```"
    items = "\n".join(f"- {paragraph(2)}" for _ in range(6))
    doc = f"# Install\n\n- Run this:\n\n{fence}\n{items}\n"
    chunks = chunk_markdown(doc, target_tokens=100, max_tokens=150, overlap_tokens=10)
    assert count_tokens(fence) > 150
    assert [c.text for c in chunks if c.token_estimate > 150] == [fence]
    assert sum("echo 0 step" in c.text for c in chunks) == 1


def test_table_is_never_split():
    table = "| key | value |\n| --- | --- |\n" + "\n".join(f"| token_{i} | {SENTENCE} |" for i in range(60))
    doc = f"# Limits\n\n{paragraph(3)}\n\n{table}\n\n{paragraph(3)}\n"
    chunks = chunk_markdown(doc)
    assert count_tokens(table) > 800
    assert [c for c in chunks if table in c.text][0].text == table
    assert sum("| token_" in c.text[c.overlap :] for c in chunks) == 1


def test_overlap_only_within_one_heading_path():
    doc = f"# A\n\n{paragraph(60)}\n\n# B\n\n{paragraph(60)}\n"
    chunks = chunk_markdown(doc, target_tokens=200, max_tokens=260, overlap_tokens=30)
    for prev, chunk in zip(chunks, chunks[1:], strict=False):
        if chunk.heading_path != prev.heading_path:
            assert chunk.overlap == 0 and chunk.text.startswith("# B")
        else:
            assert chunk.overlap > 0 and prev.text.endswith(chunk.text[: chunk.overlap].rstrip())
            assert count_tokens(chunk.text[: chunk.overlap]) <= 30
    assert {c.anchor for c in chunks} == {"h1:a", "h1:b"} and len(chunks) > 4


def test_anchors_unchanged_when_another_section_changes():
    v1 = f"# Spec\n\n## Auth\n\nShort.\n\n## Storage\n\n{paragraph(5)}\n\n### Backups\n\nDaily.\n"
    v2 = v1.replace("Short.", paragraph(120))
    storage = [(c.anchor, c.text) for v in (v1, v2) for c in chunk_markdown(v) if "Auth" not in c.heading_path]
    assert storage[: len(storage) // 2] == storage[len(storage) // 2 :]
    assert [s.anchor for s in outline(v1)] == [s.anchor for s in outline(v2)]
    assert len(chunk_markdown(v2)) > len(chunk_markdown(v1))


def test_korean_headings_keep_their_titles_and_follow_the_seed_slug():
    doc = "# 설치 안내\n\n소개 문단입니다.\n\n## 요구 사항\n\n메모리 8GB.\n\n## API 설정\n\n키를 넣습니다.\n"
    chunks = chunk_markdown(doc)
    assert [c.heading_path for c in chunks] == [["설치 안내"], ["설치 안내", "요구 사항"], ["설치 안내", "API 설정"]]
    # The seed's regex keeps only [a-z0-9], whitespace and "-": Hangul drops out and the space becomes "-".
    assert [c.anchor for c in chunks] == ["h1:-", "h2:-.-", "h2:-.api-"]
    assert [c.text for c in chunks][1] == "## 요구 사항\n\n메모리 8GB."


def test_offsets_index_the_original_text_with_crlf_and_reference_definitions():
    doc = "[ref]: http://example.com\r\n\r\n# Title\r\n\r\nBody [ref].\r\n\r\n## Sub\r\n\r\nMore.\r\n"
    chunks = chunk_markdown(doc)
    assert [doc[c.start : c.end] for c in chunks] == [c.text for c in chunks]
    assert [c.text for c in chunks] == [
        "[ref]: http://example.com",
        "# Title\r\n\r\nBody [ref].",
        "## Sub\r\n\r\nMore.",
    ]
    assert chunks[0].anchor == "root" and chunks[0].heading_path == []
    assert [(s.title, doc[s.start : s.end]) for s in outline(doc)][1] == ("Sub", "## Sub\r\n\r\nMore.")


def test_a_word_longer_than_max_is_cut_by_characters():
    doc = "# Blob\n\n" + "QmFzZTY0" * 2000 + "\n"
    chunks = chunk_markdown(doc, target_tokens=100, max_tokens=120, overlap_tokens=10)
    assert all(c.token_estimate <= 120 for c in chunks) and len(chunks) > 10
    assert "".join(doc[c.start : c.end] for c in chunks) == "# Blob\n\n" + "QmFzZTY0" * 2000


def test_empty_documents_and_bad_sizes():
    assert chunk_markdown("") == [] and chunk_markdown(" \n\n \t\n") == [] and outline("") == []
    with pytest.raises(ValueError):
        chunk_markdown("x", target_tokens=900, max_tokens=800)
    with pytest.raises(ValueError):
        chunk_markdown("x", target_tokens=100, max_tokens=200, overlap_tokens=100)


# --- properties over generated documents ---------------------------------------------------------------------------

WORDS = ["token", "Refresh", "API", "v2", "auth", "설치", "안내", "a&b", "(beta)", "x.y", "émigré", "rows", "the"]
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
sentences = words.map(lambda w: w + ".")
CODE_LINES = ["x = 1", "# not a heading", "| a | b |", "", "    indented()", "- not a list", "return refresh(token)"]


@st.composite
def blocks(draw):
    kind = draw(st.sampled_from(["heading", "paragraph", "paragraph", "fence", "table", "list"]))
    if kind == "heading":
        level, title = draw(st.integers(1, 6)), draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
        return kind, "#" * level + " " + " ".join(title), level, " ".join(title)
    if kind == "paragraph":
        lines = draw(st.lists(st.lists(sentences, min_size=1, max_size=15).map(" ".join), min_size=1, max_size=4))
        return kind, "\n".join(lines), 0, ""
    if kind == "fence":
        lines = draw(st.lists(st.sampled_from(CODE_LINES), max_size=60))
        return kind, "```py\n" + "\n".join(lines) + "\n```", 0, ""
    if kind == "table":
        rows = draw(st.lists(st.tuples(words, words), min_size=1, max_size=25))
        return kind, "| key | value |\n| --- | --- |\n" + "\n".join(f"| {a} | {b} |" for a, b in rows), 0, ""
    items = draw(st.lists(sentences, min_size=1, max_size=10))
    return kind, "\n".join(f"- {item}" for item in items), 0, ""


@st.composite
def documents(draw):
    """A document plus what its writer knows: each block's kind, offset, text and heading path."""
    crlf = draw(st.booleans())
    doc, layout, stack = draw(st.sampled_from(["", "\n", "\n  \n"])), [], []
    for kind, text, level, title in draw(st.lists(blocks(), max_size=25)):
        if crlf:
            text = text.replace("\n", "\r\n")
        if level:
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
        layout.append((kind, len(doc), text, [t for _, t in stack], level))
        separator = draw(st.sampled_from(["\n\n", "\n\n\n", "  \n\n"]))
        doc += text + (separator.replace("\n", "\r\n") if crlf else separator)
    return doc, layout


sizes = st.integers(20, 80).flatmap(lambda t: st.tuples(st.just(t), st.integers(t, t + 40), st.integers(0, 19)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), sizes)
def test_chunking_invariants(generated, size):
    doc, layout = generated
    target, maximum, overlap = size
    chunks = chunk_markdown(doc, target_tokens=target, max_tokens=maximum, overlap_tokens=overlap)
    assert chunks == chunk_markdown(doc, target_tokens=target, max_tokens=maximum, overlap_tokens=overlap)
    headings = [(offset, path) for kind, offset, _, path, _ in layout if kind == "heading"]
    atomic = {(offset, offset + len(text)) for kind, offset, text, _, _ in layout if kind in ("fence", "table")}

    # Tiling: spans in order, non-empty, and only whitespace outside them.
    position = 0
    for index, chunk in enumerate(chunks):
        assert chunk.index == index and position <= chunk.start < chunk.end
        assert doc[position : chunk.start].strip() == ""
        position = chunk.end
    assert doc[position:].strip() == ""
    assert (not chunks) == (doc.strip() == "")

    for prev, chunk in zip([None, *chunks], chunks, strict=False):
        assert chunk.text == doc[chunk.start - chunk.overlap : chunk.end]
        assert chunk.text[chunk.overlap :] == doc[chunk.start : chunk.end]
        assert chunk.token_estimate == count_tokens(chunk.text)
        # Heading path: the last heading at or before the chunk, and no heading inside it.
        assert chunk.heading_path == next((p for o, p in reversed(headings) if o <= chunk.start), [])
        assert not any(chunk.start < o < chunk.end for o, _ in headings)
        assert chunk.anchor == section_anchor(chunk.heading_path)
        if chunk.token_estimate > maximum:
            assert chunk.overlap == 0 and (chunk.start, chunk.end) in atomic
        if chunk.overlap:
            # Only from the previous chunk of the same section, within budget, never from inside a fence or table.
            assert prev is not None and prev.heading_path == chunk.heading_path
            assert not any(prev.start < o <= chunk.start for o, _ in headings)
            assert prev.start <= chunk.start - chunk.overlap and not chunk.text[0].isspace()
            assert count_tokens(chunk.text[: chunk.overlap]) <= overlap
            assert not any(a < chunk.start - chunk.overlap < b for a, b in atomic)
    for a, b in atomic:  # code blocks and tables are never split
        assert any(c.start <= a and b <= c.end for c in chunks)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_outline_matches_the_headings_written(generated):
    doc, layout = generated
    headings = [(offset, text, path, level) for kind, offset, text, path, level in layout if kind == "heading"]
    expected = []
    for i, (offset, _, path, level) in enumerate(headings):
        following = next((o for o, _, _, lv in headings[i + 1 :] if lv <= level), len(doc))
        expected.append((section_anchor(path), path, level, path[-1], offset, len(doc[:following].rstrip())))
    assert [(s.anchor, s.heading_path, s.level, s.title, s.start, s.end) for s in outline(doc)] == expected
