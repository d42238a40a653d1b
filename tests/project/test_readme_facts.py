"""README and the docs pages say what the code does: every command in
README's command table, every Redis key in docs/wire-format.md's tables (heavy
jobs have a lane of their own), the number of recorded golden responses."""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path

import fakeredis

from derender.cli import _parser
from derender_queue.settings import Settings
from derender_queue.wire import keys as keys_module
from derender_queue.wire.keys import Keys
from derender_queue.wire.queue import SMALL_JOB_BYTES, JobQueue

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = {path.name: path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}
WIRE = DOCS["wire-format.md"]


def section(title: str, text: str = README) -> str:
    start = text.index(f"\n{title}\n")
    end = text.find("\n#", start + len(title) + 2)
    return text[start:end]


def wire_rows(key: str = "") -> list[str]:
    return [line for line in WIRE.splitlines() if line.startswith("| `{p}:" + key)]


def test_every_command_is_in_the_command_table():
    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    table = [line for line in section("## Commands").splitlines() if line.startswith("| `derender ")]
    documented = {name for line in table for name in re.findall(r"`derender (\w+)", line)}
    missing = set(sub.choices) - documented
    assert missing == set(), f"commands missing from README's table: {missing}"


def test_every_redis_key_is_in_the_wire_table():
    in_code = set(re.findall(r"^\s+\{p\}:([a-z-]+)", keys_module.__doc__ or "", re.M))
    in_docs = {name for line in wire_rows() for name in re.findall(r"`\{p\}:([a-z-]+)", line.split("|")[1])}
    assert in_code - in_docs == set(), f"keys missing from docs/wire-format.md's tables: {in_code - in_docs}"


def test_heavy_jobs_go_to_a_lane_of_their_own_as_the_wire_table_says():
    keys = Keys("t")

    async def lanes() -> tuple[str, str, list[bytes], list[bytes]]:
        queue = JobQueue(fakeredis.FakeAsyncRedis(), keys, batching=False)
        light = await queue.submit("chat", b"{}", "m")
        heavy = await queue.submit("chat", b"{" + b" " * SMALL_JOB_BYTES + b"}", "m")
        return (light, heavy, await queue.redis.lrange(keys.lane("s0", "m"), 0, -1),
                await queue.redis.lrange(keys.heavy_lane("s0", "m"), 0, -1))

    light, heavy, lane, heavy_lane = asyncio.run(lanes())
    assert [light.encode() in v for v in lane] == [True] and [heavy.encode() in v for v in heavy_lane] == [True]
    (row,) = wire_rows("{T}:heavy:")
    assert "over 32 KiB" in row and f"{SMALL_JOB_BYTES // 1024} KiB" == "32 KiB", row


def test_golden_counts_are_the_files():
    """docs/compatibility.md and tests/golden/README.md count each release's recorded responses."""
    from tests.helpers.golden_files import RELEASES, recorded

    page = " ".join((ROOT / "docs" / "compatibility.md").read_text().split())
    golden_readme = " ".join((ROOT / "tests" / "golden" / "README.md").read_text().split())
    for release, folder in RELEASES.items():
        counts = {config: len(recorded(release, f"cases_{config}"))
                  for config in ("plain", "r1_hermes", "v4", "v4_reasoning", "llama")}
        total, llama = sum(counts.values()), counts["llama"]
        where = folder.relative_to(ROOT).as_posix()
        assert f"`{where}/` holds {total} responses from {release}'s render server" in page, (release, total)
        assert f"{release}: {total - llama} with the DeepSeek V4 tokenizer, {llama} with the Llama-style one" \
            in golden_readme, (release, total)


def test_readme_holds_no_test_counts():
    """Test counts drift with every test added (3,233 and 3,047 sat beside 3,299):
    README and the docs name the tiers and how to run them, not how many tests each holds."""
    counts = re.findall(r"\d[\d,]* tests\b", README + "".join(DOCS.values()))
    counts += re.findall(r"\b\d{1,3},\d{3}\b", section("## Quick start") + DOCS["development.md"])
    assert counts == [], f"test counts in README or docs/ (drop them, or derive them in a test): {counts}"


def test_every_xfail_the_docs_name_is_one():
    """README or a docs page quoting an xfail must name one that exists, so a
    fixed gap is not still described as open ("the API does not check it yet")."""
    text = README + "".join(DOCS.values())
    quoted = re.findall(r"`(tests/[\w/]+\.py)`, xfail \"([^\"]+)\"", text)
    stale = [(path, reason) for path, reason in quoted if reason not in (ROOT / path).read_text()]
    assert stale == [], f"README or docs/ quote xfails that no longer exist: {stale}"
    assert "does not check it yet" not in text


def test_intro_says_where_heavy_jobs_run_by_default():
    intro = README[:README.index("\n## ")]
    assert "heavy_executor" not in Settings.model_fields and Settings.model_fields["heavy_workers"].default >= 1
    assert "thread executor" not in intro and "forked child" in intro, intro


def test_no_page_describes_v1s_sorted_set():
    """Wire format v1 is removed (0.2.0): outside docs/wire-format.md's upgrade
    note and the workers' arq section, README and the docs describe lanes, not
    v1's sorted set, and no setting picks a wire format."""
    assert "wire_format" not in Settings.model_fields
    pages = {name: text for name, text in DOCS.items() if name != "wire-format.md"}
    pages["worker.md"] = pages["worker.md"].replace(
        section("## What we changed in arq 0.28, and why", pages["worker.md"]), "")
    rest = README + "".join(pages.values())
    found = re.findall(r"[^\n]*(?:sorted.set|ZCARD|ZSET)[^\n]*", rest, re.I)
    assert found == [], found


def test_the_wire_package_names_both_formats_and_every_module():
    import derender_queue.wire as wire

    doc = wire.__doc__ or ""
    assert "v1 was removed" in doc and "v2" in doc, doc
    modules = {p.stem for p in Path(wire.__file__).parent.glob("*.py")} - {"__init__"}
    missing = {m for m in modules if f"`{m}`" not in doc}
    assert missing == set(), f"modules the wire package's docstring does not name: {missing}"
