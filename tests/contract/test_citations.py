"""What the repository cites is in the repository: no file points at the team's shared folder (its SPEC, DIALECTS and
STYLE documents live outside; the dialects' contracts are docs/dialects.md), and the benchmark results git tracks
are exactly the ones the README and docs/ name as their tables' sources, plus what bench.capacity reads."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"\b(?:DIALECTS|SPEC|STYLE)\.md\b|/work/shared\b")
RESULT = re.compile(r"bench/results/([A-Za-z0-9_.-]+\.json)")
# bench.capacity reads the newest result of each (bench/capacity.py, load_inputs); the docs/scaling.md table comes
# from them, and tests/unit/test_capacity.py checks it
CAPACITY_INPUTS = ("storage-10000-", "remember-load-", "latency-10000-")
MOST_RESULTS = 20


def _tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "--", *paths], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_nothing_outside_bench_cites_the_shared_folder():
    own = str(Path(__file__).relative_to(ROOT))
    citing = []
    for name in _tracked("."):
        path = ROOT / name
        # bench/ is left alone: its scripts read LoCoMo from the shared folder by design, and cite SPEC's targets
        if name.startswith("bench/") or name == own or not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        citing += [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not citing, f"cite docs/dialects.md (or another page of the repository) instead: {citing}"


def test_the_tracked_benchmark_results_are_the_ones_the_docs_name():
    named = {
        match
        for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
        for match in RESULT.findall(doc.read_text())
    }
    tracked = {Path(name).name for name in _tracked("bench/results")}
    newest = {max(n for n in tracked if n.startswith(prefix)) for prefix in CAPACITY_INPUTS}
    assert named <= tracked, f"named in the docs but not tracked (git add -f): {sorted(named - tracked)}"
    assert tracked <= named | newest, f"tracked but named nowhere (git rm --cached): {sorted(tracked - named - newest)}"
    assert len(tracked) <= MOST_RESULTS, f"{len(tracked)} results tracked; the docs' tables name at most {MOST_RESULTS}"
