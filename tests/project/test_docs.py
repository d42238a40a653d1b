"""README is a short guide and docs/ holds the rest (issue 33): README at most
300 lines, its two commands the ones `.ci/run` and a newcomer run, every page
and section a link names present, every page reachable from README, every
table of figures naming the `bench/` command that produced it, and no diary
(issue numbers, dated runs) in the pages this project writes."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
# Pages whose records of runs (dates, seeds) are their subject: the parser and vLLM comparisons.
RUN_RECORDS = {"parsers.md", "compatibility.md"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A measured figure: a decimal or thousands-separated number with a unit, a rate, or a ratio.
FIGURE = re.compile(r"\d+\.\d+ ?(?:ms|µs|us|s|MB|MiB|KiB)\b|\d[\d,]* (?:jobs|req|chunks|tokens|lines)/s\b"
                    r"|\b\d+(?:\.\d+)?x\b")
# ... or a table whose header names a unit and whose rows hold numbers.
UNIT_HEADER = re.compile(r"\b(?:ms|µs|us|MB|MiB|KiB|jobs/s|req/s|chunks/s|tokens/s|CPU)\b")
BENCH = re.compile(r"bench/(\w+)\.py")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", page.read_text(), re.M)}


def links(page: Path) -> list[tuple[Path, str]]:
    """Local links of a page: (target page, anchor or "")."""
    found = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"\w+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        found.append(((page.parent / path).resolve() if path else page, anchor))
    return found


def test_readme_is_a_short_guide():
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail to a page under docs/"


def test_every_link_names_a_page_and_section_that_exist():
    broken = []
    for page in [README, *DOCS]:
        for target, anchor in links(page):
            if not target.exists():
                broken.append((page.name, str(target.relative_to(ROOT))))
            elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                broken.append((page.name, f"{target.name}#{anchor}"))
    assert broken == [], f"links to pages or sections that do not exist: {broken}"


def test_every_docs_page_is_reachable_from_readme():
    seen, todo = set(), [README.resolve()]
    while todo:
        page = todo.pop()
        if page in seen or page.suffix != ".md" or not page.exists():
            continue
        seen.add(page)
        todo += [target for target, _ in links(page)]
    orphans = [page.name for page in DOCS if page.resolve() not in seen]
    assert orphans == [], f"docs pages no link from README leads to: {orphans}"


def test_the_two_commands_are_the_ones_ci_and_a_newcomer_run():
    """Quick start shows exactly two set-up commands: one runs the service (the
    embedded Redis when none is configured), one runs the tests, word for word
    what .ci/run runs."""
    text = README.read_text()
    quick = text[text.index("\n## Quick start\n"):text.index("\n## ", text.index("\n## Quick start\n") + 1)]
    before_recipe = quick[:quick.index("<!-- recipe:")]
    commands = [line.strip() for line in before_recipe.splitlines() if line.startswith("    ")]
    assert len(commands) == 2, commands
    run, test = commands
    assert run.endswith("&& .venv/bin/derender run") and "DERENDER_REDIS_URL" in quick, run
    assert test.endswith("&& .venv/bin/python -m pytest"), test
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci, f"README's test command is not a line of .ci/run: {test}"


def test_readme_keeps_the_design_vocabulary():
    text = README.read_text()
    words = ["Python", "redis", "arq", "pydantic", "tokenizers", "prometheus-client",
             "`api/`", "`worker/`", "`tests/`", "`deploy/`", "`docker-compose.yml`", "where does ... live"]
    assert [w for w in words if w not in text] == []


def tables(text: str) -> list[tuple[str, str]]:
    """Each markdown table with the paragraph just before it."""
    found, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            start = i
            while i < len(lines) and lines[i].startswith("|"):
                i += 1
            before = start - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            para_start = before
            while para_start > 0 and lines[para_start - 1].strip() and not lines[para_start - 1].startswith("|"):
                para_start -= 1
            found.append(("\n".join(lines[para_start:before + 1]), "\n".join(lines[start:i])))
        i += 1
    return found


def holds_figures(table: str) -> bool:
    header, _, rows = table.split("\n", 2)
    return bool(FIGURE.search(table) or (UNIT_HEADER.search(header) and re.search(r"\d", rows)))


def test_every_table_of_figures_names_the_bench_that_produced_them():
    unbacked, missing = [], []
    for page in [README, *DOCS]:
        for intro, table in tables(page.read_text()):
            if not holds_figures(table):
                continue
            scripts = BENCH.findall(intro + table)
            if not scripts:
                unbacked.append((page.name, table.splitlines()[0][:80]))
            missing += [(page.name, s) for s in scripts if not (ROOT / "bench" / f"{s}.py").exists()]
    assert unbacked == [], f"tables of figures with no bench command before or in them: {unbacked}"
    assert missing == [], f"bench scripts named that do not exist: {missing}"


def test_the_performance_page_is_one_table_each_row_with_its_command_and_results():
    text = (ROOT / "docs" / "performance.md").read_text()
    ((_, table),) = tables(text)
    rows = table.splitlines()[2:]
    assert rows
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 5, row
        assert FIGURE.search(cells[1]) or re.search(r"\d", cells[1]), row
        assert re.fullmatch(r"`python bench/\w+\.py[^`]*`", cells[3]), f"no command: {row}"
        assert (ROOT / BENCH.search(cells[3]).group(0)).exists(), row
        for name in re.findall(r"`([\w.-]+\.txt)`", cells[4]):
            assert (ROOT / "bench" / "results" / name).exists(), f"no results file {name}: {row}"


def test_docs_pages_hold_current_facts_not_a_diary():
    """History lives in git and bench/results: no issue numbers, dated runs or
    sessions in README or the pages (results files may carry a date in their name)."""
    diary = re.compile(r"\bissue \d+|(?<![\w])20\d\d-\d\d-\d\d(?![\w.])|\bsession\b", re.I)
    found = [(page.name, m.group(0)) for page in [README, *DOCS] if page.name not in RUN_RECORDS
             for m in diary.finditer(page.read_text())]
    assert found == [], found
