"""The front page stays a front page (issue 49): README.md within 300 lines; no line of it, of docs/ or of
bench/README.md over 400 characters; every page under docs/ linked from the README itself; every relative link of the
README and docs/ pointing at a file (and a heading) that exists; and every block the benchmark scripts refresh present
on the page they write (docs/benchmarks.md)."""

from __future__ import annotations

import re
from pathlib import Path

from bench.report import BENCHMARKS_PAGE, LINE_LIMIT, fit_lines

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
BENCH_README = ROOT / "bench" / "README.md"
README_MOST_LINES = 300
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)
MARKER = re.compile(r"<!-- bench:([\w-]+):(start|end) -->")
# the blocks bench/*.py refresh through report.replace_readme_block, named as their scripts name them
REFRESHED = re.compile(r"replace_readme_block\(\s*f?\"([\w-]+?)(?:-\{[^}]+\})?\"")


def _links(page: Path) -> list[tuple[Path, str]]:
    """(target file, anchor) of every relative link on `page`, code blocks left out."""
    found = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        found.append(((page.parent / path).resolve() if path else page, anchor))
    return found


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lowercased, punctuation but hyphens dropped, spaces as hyphens; repeats numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_the_readme_is_one_screenful_per_purpose():
    lines = README.read_text().count("\n")
    assert lines <= README_MOST_LINES, f"README.md has {lines} lines; move detail to a docs/ page and link it"


def test_no_line_of_the_readme_or_docs_is_over_the_limit():
    long = [
        f"{page.relative_to(ROOT)}:{n} ({len(line)} characters)"
        for page in [README, *DOCS, BENCH_README]
        for n, line in enumerate(page.read_text().splitlines(), 1)
        if len(line) > LINE_LIMIT
    ]
    assert not long, f"lines over {LINE_LIMIT} characters (wrap prose, shorten cells into prose): {long}"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {target for target, _ in _links(README)}
    unlinked = [str(page.relative_to(ROOT)) for page in DOCS if page.resolve() not in linked]
    assert not unlinked, f"pages the README does not link (add them to 'Where to go next'): {unlinked}"


def test_every_relative_link_reaches_a_file_and_heading():
    broken = []
    for page in [README, *DOCS]:
        for target, anchor in _links(page):
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
            elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
                broken.append(f"{page.relative_to(ROOT)} -> {target.relative_to(ROOT)}#{anchor}")
    assert not broken, f"links to nothing: {broken}"


def test_every_block_the_benchmarks_refresh_is_on_the_benchmarks_page():
    page = BENCHMARKS_PAGE.read_text()
    markers = set(MARKER.findall(page))
    blocks = {name for name, _ in markers}
    assert all((name, "start") in markers and (name, "end") in markers for name in blocks)
    refreshed = {name for script in (ROOT / "bench").glob("*.py") for name in REFRESHED.findall(script.read_text())}
    assert refreshed, "found no call of replace_readme_block in bench/"
    missing = sorted(p for p in refreshed if not any(b == p or b.startswith(f"{p}-") for b in blocks))
    assert not missing, f"blocks the scripts refresh but docs/benchmarks.md lacks: {missing}"
    assert not MARKER.search(README.read_text()), "benchmark blocks belong on docs/benchmarks.md, not the README"


def test_a_refreshed_block_keeps_to_the_line_limit():
    wide = "| conversation | " + " | ".join(f"method {n} with a long label" for n in range(30)) + " |"
    table = [wide, "|" + "---|" * 31, "| conv-1 | " + " | ".join("0.5 / 0.6" for _ in range(30)) + " |"]
    prose = "Latest: " + "a figure and its source, " * 40
    shaped = fit_lines("\n".join([prose, "", *table, "", "| a | b |", "|---|---|", "| 1 | 2 |"]))
    lines = shaped.split("\n")
    assert max(map(len, lines)) <= LINE_LIMIT
    assert "| conversation | conv-1 |" in lines and "| method 29 with a long label | 0.5 / 0.6 |" in lines
    assert "| a | b |" in lines and "| 1 | 2 |" in lines  # a table that fits is left as it is
    assert " ".join(line for line in lines if line and not line.startswith("|")).split() == prose.split()
