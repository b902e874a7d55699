"""qlib.claims rendering (issue 31, item 4): the summary, the short blocks per study, the compact form a
notebook shows, and a width check that keeps every table inside a 1000 px pane."""

import json
import re

import pytest

from qlib import claims, claims_table, runner
from qlib.config import ROOT
from qlib.power import DPass

#: the content width of a 1000 px pane (GitHub's markdown body pads it by 32 px a side)
PANE_PX = 936
#: a generous width of one character of GitHub's 16 px sans-serif (bold, digits and capitals included),
#: and the horizontal padding plus border of a table cell (6 + 13 + 13 + 1 px)
CHAR_PX, CELL_PAD_PX = 9.0, 27


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _min_width_px(table: list[str]) -> float:
    """The narrowest a GFM table can be laid out: per column its longest unbreakable word (cells wrap at
    spaces and <br>), at CHAR_PX a character, plus the cell padding."""
    widest = {}
    for line in table:
        if re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line.strip()):
            continue
        for j, cell in enumerate(_cells(line)):
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", cell.replace("<br>", " "))  # a link shows its text
            words = re.sub(r"[*`\\]", "", text).split()
            widest[j] = max(widest.get(j, 0), max((len(w) for w in words), default=0))
    return sum(w * CHAR_PX + CELL_PAD_PX for w in widest.values())


def _tables(md: str) -> list[list[str]]:
    out, cur = [], []
    for line in md.splitlines():
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


def check_fits(md: str, max_columns: int = 4) -> None:
    """Every table of ``md`` has at most ``max_columns`` columns and can be laid out inside the pane; no line
    outside a table holds a word wider than the pane."""
    for t in _tables(md):
        assert max(len(_cells(line)) for line in t) <= max_columns, t[0]
        assert _min_width_px(t) <= PANE_PX, (t[0], _min_width_px(t))
    for line in md.splitlines():
        if not line.startswith("|"):
            assert all(len(w) * CHAR_PX <= PANE_PX for w in line.split()), line[:80]


def _rows_from_json(path) -> list[claims.ClaimRow]:
    out = []
    for d in json.loads(path.read_text()):
        d = {k: v for k, v in d.items() if k in claims.ClaimRow.__dataclass_fields__}
        d["counterfactuals"] = tuple(claims.Counterfactual(**c) for c in d["counterfactuals"])
        if d.get("power") is not None:
            d["power"] = DPass(**d["power"])
        out.append(claims.ClaimRow(**d))
    return out


def _example_rows() -> list[claims.ClaimRow]:
    far = claims.Counterfactual("JSQ(2) in place of JSQ(d)", "P(max = 2) = 0.000 (0.000 to 0.000)", False)
    near = claims.Counterfactual(
        "JSQ(d-1)", "P(max = 2) = 0.97 (0.93 to 1.00)", True, near=True, se_distance=1.2
    )
    sweep = (
        "n=1000: P(max = 2) = 0.478 (0.367 to 0.588), P(max = 3) = 0.522; n=3000: P(max = 2) = 0.772 "
        "(0.707 to 0.837), P(max = 3) = 0.228; n=10000: P(max = 2) = 0.975 (0.958 to 0.993), P(max = 3) = "
        "0.025; slope of log P(max != k) in log n: -1.33 (95% CI -1.89 to -1.09)"
    )
    return [
        claims.ClaimRow(
            "the maximum queue length concentrates on k = 2",
            "family A: lam = 1 - n^-0.5; n = 1e3",
            "P(max = k) -> 1",
            sweep,
            True,
            "the CI of P(max = k) >= p_min",
            source="supermarket: scaling families",
            counterfactuals=(far, near),
            taus=20.0,
            start="empty",
            threshold="P(max = k) >= 0.95",
            resolution="does not resolve: JSQ(d-1)",
        ),
        claims.ClaimRow(
            "the mixing time scales with d^(k-1), not with 1/(1-lam)",
            "n = 3000, d = 100..283",
            "exponent 1",
            "exponent of T_meet in d: 0.220 (95% CI -0.166 to 0.612)",
            False,
            "CI within k - 1 +- 0.3",
            source="supermarket: mixing time",
            outcome="FAIL",
            threshold="CI within 1 +- 0.3",
            counterfactuals=(far,),
        ),
        claims.ClaimRow(
            "E[u_1] = lam n",
            "n = 10",
            "lam n",
            "10.0 ± 0.1",
            True,
            "within 5 SE",
            source="supermarket: scaling families",
            kind="identity",
        ),
        claims.ClaimRow(
            "coalescence time in relaxation times",
            "d=10",
            ">= n L",
            "11.9 τ",
            True,
            "every T >= n L",
            source="supermarket: exact stationary samples",
            kind="measurement",
        ),
    ]


def test_summary_first_then_rows_grouped_by_study_as_short_blocks():
    rows = _example_rows()
    md = claims_table.to_markdown(rows)
    lines = md.splitlines()
    assert lines[0] == claims_table.summary(rows)  # the counts line, then the summary table
    head = lines.index("| claim | measured (key number, 95% CI) | verdict | figure |")
    fam, mix = md.index("## Supermarket: scaling families"), md.index("## Supermarket: mixing time")
    assert head < fam < mix < md.index("## Supermarket: exact stationary samples")
    summary_rows = [line for line in lines if line.startswith("| 1 ·") or line.startswith("| 2 ·")]
    assert len(summary_rows) == 2  # one line per claim; the identity and the measurement are only counted
    assert "**PASS**" in summary_rows[0] and "**FAIL**" in summary_rows[1]
    assert "n=10000: P(max = 2) = 0.975 (0.958 to 0.993)" in summary_rows[0]  # the key number: the largest n
    assert "[01f](01f_families_concentration.png)" in summary_rows[0]
    assert "[02b](02b_d_scaling.png)" in summary_rows[1]
    block = md[md.index("### 1 · PASS") : md.index("### 2 · FAIL")]
    for field in (
        "**parameters:**",
        "**measured:**",
        "**criterion:**",
        "**threshold (pre-set):** P(max = k) >= 0.95",
        "**start, relaxation times:** empty; 20 τ",
    ):
        assert field in block
    details = block[block.index("<details>") : block.index("</details>")]
    assert "wrong models: 1 far (1 fail), 1 near (0 fail); resolution" in details
    assert "JSQ(2) in place of JSQ(d): P(max = 2) = 0.000 (0.000 to 0.000) → FAIL" in details
    assert (
        "near: JSQ(d-1)" in details and "+1.2 SE" in details and "**Resolution:** does not resolve" in details
    )
    assert md.index("<summary>Identities") > block.find("### 1") and "1 row, 1 PASS</summary>" in md
    assert md.index("**Measurements**") < md.index("### 4 · PASS: coalescence time")
    check_fits(md)


def test_kinds_added_later_are_counted_apart_and_collapsed():
    """A kind other than claim and measurement (the sanity checks of issue 32, or one the renderer has no name
    for) renders under its study, counted and collapsed, and never in the summary of claims."""
    row = claims.ClaimRow("submultiplicativity", "p", "t", "m", True, source="s")
    for kind, title in (
        ("check", "Sanity checks (they hold for any chain"),
        ("novel", "Novel (counted apart"),
    ):
        object.__setattr__(row, "kind", kind)  # a kind KINDS may not list yet
        md = claims_table.to_markdown([row])
        assert f"<summary>{title}" in md and "- 1 · **PASS** submultiplicativity" in md, md
        assert "| 1 ·" not in md


def test_key_number_picks_the_number_the_verdict_rests_on():
    r = _example_rows()
    assert claims_table.key_number(r[1]) == r[1].measured  # short: whole
    assert claims_table.key_number(r[0]).startswith(
        "n=10000: P(max = 2) = 0.975 (0.958 to 0.993)"
    )  # a sweep: last point
    long = claims.ClaimRow(
        "c",
        "p",
        "t",
        "T/(k d^(k-1) n ln n) = 1.18, 1.59, 1.12, 1.34, 1.77, 1.01, 0.93, 1.22; "
        "exponent in n -0.001 (95% CI -0.105 to 0.102)",
        True,
    )
    # the part with a CI
    assert claims_table.key_number(long) == "exponent in n -0.001 (95% CI -0.105 to 0.102)"
    aside = claims.ClaimRow(
        "c",
        "p",
        "t",
        "fluid fixed point (the n -> oo equilibrium, stated once and for all "
        "here), relative error at c = 0.4, 0.2: k=2: 17.8%, 9.5%. Simulated at n = 1e4: 22%",
        True,
    )
    assert (claims_table.key_number(aside)
            == "fluid fixed point, relative error at c = 0.4, 0.2: k=2: 17.8%, 9.5%")
    words = claims.ClaimRow("c", "p", "t", "x " * 200, True)
    key = claims_table.key_number(words)
    assert len(key) <= claims_table.KEY_WIDTH + 2 and key.endswith("…")


def test_compact_form_for_a_notebook():
    rows = _example_rows()
    df = claims_table.to_dataframe(rows, compact=True)
    assert list(df.columns) == ["claim", "measured", "threshold", "verdict"]
    assert list(df.index) == [1, 2, 3, 4] and df.index.name == "number"
    assert list(df.verdict) == ["PASS", "FAIL", "PASS", "PASS"] and df.threshold[3] == "—"
    assert df.measured[1] == claims_table.key_number(rows[0]) and "(identity)" in df.claim[3]
    md = claims_table.to_markdown(rows, compact=True)
    assert md == claims_table.compact_markdown(rows) and "<details>" not in md
    assert md.splitlines()[2] == "| claim | measured (key number) | threshold (pre-set) | verdict |"
    assert sum(line.startswith("| ") and "**" in line for line in md.splitlines()) == 4  # every row, numbered
    check_fits(md)
    assert len(claims_table.to_dataframe([], compact=True)) == 0


def test_the_width_check_fails_the_old_twelve_column_table():
    """The check can fail: the table of main 11f2643 (12 columns, 1194-1620 px wide) does not fit."""
    cells = ["a_rather_long_unbreakable_cell_value"] * 12
    old = "| " + " | ".join(cells) + " |\n|" + "---|" * 12 + "\n| " + " | ".join(cells) + " |\n"
    with pytest.raises(AssertionError):
        check_fits(old)
    with pytest.raises(AssertionError):
        check_fits(old, max_columns=12)  # narrow enough in columns, still too wide in pixels


def test_every_figure_named_exists_and_every_notebook_claim_has_one():
    for study, pairs in claims_table.FIGURES.items():
        assert study in runner.STUDIES, study
        for _, name in pairs:
            assert (ROOT / "figures" / name).exists(), name
    rows = _rows_from_json(ROOT / "figures" / "claims.json")
    for r in rows:
        if r.kind == "claim" and r.source != "supermarket: level flow":
            assert claims_table.figure_of(r), (r.source, r.claim)


def test_the_published_rows_render_inside_the_pane():
    """figures/claims.json (the full-mode rows): the summary, every block and the compact form fit."""
    rows = _rows_from_json(ROOT / "figures" / "claims.json")
    md = claims_table.to_markdown(rows)
    check_fits(md)
    check_fits(claims_table.summary_markdown(rows, figures="figures/"))
    for study in runner.STUDIES:
        check_fits(claims_table.compact_markdown([r for r in rows if r.source == study]))
    n_claims = sum(r.kind == "claim" for r in rows)
    assert (
        len([line for line in claims_table.summary_markdown(rows).splitlines()
             if re.match(r"\| \d+ ·", line)])
        == n_claims
    )
    assert (
        md.count("<details>") >= n_claims
    )  # every claim with wrong models or a resolution has them collapsed
    blocks = re.split(r"\n### ", md)[1:]
    assert max(len(b.split("<details>")[0]) for b in blocks) < 2500  # a short block, not a 1500 px row


def test_reproduce_puts_the_summary_in_the_readme_and_the_blocks_in_claims_md(monkeypatch, tmp_path):
    import qlib.__main__ as cli

    readme = tmp_path / "README.md"
    readme.write_text("# t\n\n<!-- claims:start -->\nold\n<!-- claims:end -->\n\nafter\n")
    monkeypatch.setattr(cli, "ROOT", tmp_path)
    monkeypatch.setattr(runner, "collect", lambda *a, **k: _example_rows())
    (tmp_path / "figures").mkdir()
    out = tmp_path / "figures" / "claims.md"
    assert cli.reproduce(quick=True, markdown=str(out), update_readme=True) == cli.EXIT_FAIL
    text = readme.read_text()
    inside = text[text.index("<!-- claims:start -->") : text.index("<!-- claims:end -->")]
    assert "old" not in inside and text.endswith("\n\nafter\n")
    assert claims_table.summary_markdown(_example_rows(), figures="figures/") in inside
    assert (
        "<details>" not in inside
        and "### " not in inside
        and "(figures/01f_families_concentration.png)" in inside
    )
    table = out.read_text()
    assert (
        table.startswith("# Claims table")
        and "<details>" in table
        and "](01f_families_concentration.png)" in table
    )
