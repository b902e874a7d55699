"""The claims table as a reader meets it: the summary line, the summary table, the short blocks
of ``figures/claims.md`` (laid out for a 1000 px pane), the compact form a notebook shows, plain
text, JSON (every field, numbers as published) and a DataFrame. The rows themselves are
:mod:`qlib.claims`."""

from __future__ import annotations

import json
import re
from dataclasses import asdict

from qlib.claims import KINDS, VERDICTS, ClaimRow, Counterfactual, counts


def summary(rows: list[ClaimRow]) -> str:
    """One line: per kind, how many rows PASS / FAIL / are INCONCLUSIVE / are findings, and how
    many passing claims are sound."""
    c = counts(rows)
    parts = []
    names = KIND_NAMES
    for kind in KINDS:
        n = sum(c[kind].values())
        if not n:
            continue
        txt = f"{names.get(kind, kind)}: " + ", ".join(f"{c[kind][v]} {v if v != 'finding' else 'findings'}"
                                             for v in VERDICTS if c[kind][v] or v in ("PASS", "FAIL"))
        if kind == "claim":
            passing = [r for r in rows if r.kind == "claim" and r.verdict == "PASS"]
            computed = sum(r.power is not None and r.power.computed for r in passing)
            sound = [r for r in passing if r.sound]
            identify = sum(r.power is not None and r.power.computed for r in sound)
            txt += (f" ({len(sound)} of the {len(passing)} PASS sound: every far wrong "
                    f"model fails, and every band of d′ that passes, scanned for {computed} of them, lies "
                    f"between d/2 and 2d; of the sound, {identify} identify d by that scan and "
                    f"{len(sound) - identify} are not shown to tell d from 2d: no d′ scan, their "
                    "evidence is their wrong models)")
        parts.append(txt)
    return "; ".join(parts) + "."


def d_pass_bands(r: ClaimRow) -> list[list[int]] | None:
    """Every band [low, high] of d′ that would pass the row's criterion (qlib.power's scan); None
    where it is not computed."""
    return [list(b) for b in r.power.bands] if r.power is not None and r.power.computed else None


def d_pass_range(r: ClaimRow) -> list[int] | None:
    """[low, high]: the d′ for which JSQ(d′) at the row's point would pass its criterion (qlib.power);
    None where it is not computed (``power.why`` says why)."""
    return [r.power.low, r.power.high] if r.power is not None and r.power.computed else None


def lam_pass_range(r: ClaimRow) -> list[float] | None:
    """[f_low, f_high]: JSQ(d) at 1 - lam′ = f (1 - lam) would pass the row's criterion for f in this range
    (qlib.power); None where it is not computed."""
    p = r.power
    return [p.lam_low, p.lam_high] if p is not None and p.lam_low is not None else None


def _cf_text(r: ClaimRow) -> str:
    if not r.counterfactuals:
        return "none"
    return "; ".join(_cf_one(c) for c in r.counterfactuals)


def _cf_one(c: Counterfactual) -> str:
    tag = "near: " if c.near else ""
    res = ("not rejected (not resolved)" if c.near else "not rejected (!)") if c.passed else "FAIL"
    se = "" if c.se_distance is None else f", {c.se_distance:+.1f} SE from the threshold"
    return f"{tag}{c.model}: {c.measured}{se} → {res}"


# ---- rendering: the summary, the short blocks, the compact form -------------------------------------------
# Everything below is laid out for a 1000 px pane (a notebook, GitHub): narrow tables of at most four columns
# and one short block per row; the wrong models sit in a collapsed <details>. claims.json keeps every field.

#: kind -> how the rows of that kind are called in the summary line and the section headings; a kind not
#: listed here (a new one in KINDS) is rendered under its own name.
KIND_NAMES = {"claim": "claims", "identity": "identities", "measurement": "measurements",
              "check": "sanity checks"}

#: study -> [(regular expression on the claim, figure file)], the first match wins ("" matches every claim):
#: the figure of figures/ that draws a row. A study without an entry has no figure (the level-flow rows).
FIGURES: dict[str, list[tuple[str, str]]] = {
    "supermarket: maximum queue length": [(r"finite-n", "01d_finite_n.png"),
                                          (r"concentrates", "01a_regime_map.png"), (r"", "01b_profiles.png")],
    "supermarket: scaling families": [(r"buffer|SD\(N\)", "01h_families_buffer.png"),
                                      (r"", "01f_families_concentration.png")],
    "supermarket: mixing time": [(r"scales with d|exponent in d|d-sweep|d sweep", "02b_d_scaling.png"),
                                 (r"lower bound", "02c_lower_bound.png"),
                                 (r"exponential", "02d_exponential_tail.png"),
                                 (r"good set", "02e_good_set.png"), (r"", "02a_upper_bounds.png")],
    "supermarket: mixing time in the regime": [(r"predicted", "02h_predicted.png"), (r"", "02f_regime.png")],
    "heterogeneous servers": [(r"band", "03_band.png"), (r"informed", "03_informed.png"),
                              (r"", "03_busy_and_work.png")],
    "supermarket: exact stationary samples": [(r"coalescence", "04a_coalescence.png"),
                                              (r"", "04b_max_law.png")],
    "supermarket: fluctuations": [(r"autocorrelation", "02g_fluctuations_acf.png"),
                                  (r"", "01i_fluctuations_sd.png")],
    "supermarket: k = 3 inside the regime": [(r"mixing time|relaxation", "02i_k3_mixing.png"),
                                             (r"", "01j_k3_maximum.png")],
}

#: the longest key number (characters) the summary shows; the block below it has the whole measurement
KEY_WIDTH = 110


def figure_of(row: ClaimRow) -> str | None:
    """The file name (in figures/) of the figure that draws ``row``, from :data:`FIGURES`; None if none
    does."""
    for pattern, name in FIGURES.get(row.source, []):
        if re.search(pattern, row.claim):
            return name
    return None


def _split_top(s: str, sep: str) -> list[str]:
    """``s`` split at ``sep`` outside parentheses and brackets."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        c = s[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth = max(0, depth - 1)
        elif depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts if p.strip()]


#: a measurement at one point of a sweep: "n=1000: ...", "rho=0.3: ...", "A n=1000: ..."
_POINT = re.compile(r"^(?:[A-Z]\w* )?[A-Za-z_]+ ?= ?[-+\w.]+:")
_HAS_CI = re.compile(r"CI|±|\(-?[\d.]+(?:e[-+]?\d+)? to -?[\d.]+")


def _shorten(s: str, width: int) -> str:
    """``s`` cut to ``width`` characters: whole comma-separated parts dropped from the end, else at a word,
    with …"""
    if len(s) <= width:
        return s
    parts = _split_top(s, ", ")
    while len(parts) > 1 and len(", ".join(parts)) > width:
        parts.pop()
    s2 = ", ".join(parts)
    if len(s2) <= width:
        return s2 + " …"
    return s2[:width].rsplit(" ", 1)[0] + " …"


def key_number(row: ClaimRow, width: int = KEY_WIDTH) -> str:
    """The row's key number for the summary: its whole ``measured`` when short; else its first sentence;
    of a sweep ("n=1000: ...; n=3000: ..."), its last point (the largest n or load); else its first part
    with a confidence interval (an exponent, a slope); else the first sentence without its asides; cut to
    ``width`` characters."""
    m = " ".join(str(row.measured).split())
    if len(m) <= width:
        return m
    first = re.split(r"(?<=[%\d)])\. (?=[A-Z])", m, maxsplit=1)[0]
    if len(first) <= width:
        return first
    segs = _split_top(first, "; ")
    if _POINT.match(segs[0]):  # a sweep: its last point
        return _shorten([s for s in segs if _POINT.match(s)][-1], width)
    ci = [s for s in segs if _HAS_CI.search(s)]
    if ci:
        return _shorten(ci[0], width)
    bare = " ".join(_drop_asides(first).split())
    return _shorten(bare if len(bare) <= width else segs[0], width)


def _drop_asides(s: str) -> str:
    """``s`` without its asides: top-level parentheses after a space that hold words (not "P(max = 2)", not
    "(1-lam)") and no confidence interval."""
    out, depth, start = [], 0, None
    for i, c in enumerate(s):
        if c == "(":
            if depth == 0:
                start = i
            depth += 1
        elif c == ")" and depth:
            depth -= 1
            if depth == 0:
                inner = s[start:i + 1]
                aside = start > 0 and s[start - 1] == " " and " " in inner and not _HAS_CI.search(inner)
                out.append("" if aside else inner)
                start = None
            continue
        if depth == 0:
            out.append(c)
    return "".join(out).replace(" ,", ",")


def _label(row: ClaimRow) -> str:
    """The claim without the tail that says it is a finding (the verdict column says so)."""
    return str(row.claim).split(" — ")[0].strip()


def where(row: ClaimRow, width: int = 60) -> str:
    """Where the row was measured, in a few words: the head of its parameters (up to the first ':', ';' or
    parenthesis), cut to ``width`` characters: "family A", "n=10000, d=300, 1-lam=0.1"."""
    head = re.split(r"[:;]| \(", str(row.parameters), maxsplit=1)[0].strip().rstrip(".,")
    return _shorten(head, width)


def _verdict_md(r: ClaimRow) -> str:
    unsound = r.verdict == "PASS" and r.kind == "claim" and not r.sound
    return f"**{r.verdict}**" + (" (not sound)" if unsound else "")


def _numbered(rows: list[ClaimRow]) -> list[tuple[int, ClaimRow]]:
    return list(enumerate(rows, 1))


def summary_markdown(rows: list[ClaimRow], figures: str | None = "") -> str:
    """The results at a glance (README, top of figures/claims.md): the summary line, then one line per
    claim row (numbered as in the table) with its verdict, its key number (:func:`key_number`) and the
    figure that draws it, linked as ``figures + file`` (None: no figure column); identities, measurements
    and checks are only counted.

    Four narrow columns: claim (and where it was measured) | key number | verdict | figure."""
    head = ["claim", "measured (key number, 95% CI)", "verdict"] + ([] if figures is None else ["figure"])
    out = [summary(rows), "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in _numbered(rows):
        if r.kind != "claim":
            continue
        cells = [f"{i} · {_md(_label(r))}<br>*{_md(where(r))}*", _md(key_number(r)), _verdict_md(r)]
        if figures is not None:
            f = figure_of(r)
            cells.append(f"[{f.split('_')[0]}]({figures}{f})" if f else "—")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _block(i: int, r: ClaimRow) -> list[str]:
    """One row as a short block: heading with its verdict, then claim, parameters, measured, criterion and
    threshold; the wrong models and the resolution collapsed in <details>."""
    out = [f"### {i} · {_verdict_md(r).replace('**', '')}: {_md(_label(r))}", ""]
    items = [("parameters", r.parameters)]
    if r.taus is not None:
        items.append(("start, relaxation times", f"{r.start or '?'}; {r.taus:.0f} τ"))
    items += [("theory", r.theory), ("measured", r.measured), ("criterion", r.criterion),
              ("threshold (pre-set)", r.threshold or "the one stated in the criterion")]
    if " — " in str(r.claim):
        items.insert(0, ("note", str(r.claim).split(" — ", 1)[1]))
    out += [f"- **{k}:** {_md(v)}" for k, v in items if v not in (None, "")]
    if r.reference:
        out.append(f"- **reference:** {_md(r.reference)}")
    if r.kind == "claim" and r.power is not None:
        out.append(f"- **d′ that would pass (power):** {_md(r.power.text())}")
    if r.counterfactuals or r.resolution:
        far = [c for c in r.counterfactuals if not c.near]
        near = [c for c in r.counterfactuals if c.near]
        what = [f"{len(far)} far ({sum(not c.passed for c in far)} fail)"] if far else []
        what += [f"{len(near)} near ({sum(not c.passed for c in near)} fail)"] if near else []
        label = "wrong models: " + ", ".join(what) + ("; resolution" if r.resolution else "")
        label = label if what else "resolution"
        out += ["", f"<details><summary>{label}</summary>", ""]
        out += [f"- {_md(_cf_one(c))}" for c in r.counterfactuals]
        if r.resolution:
            out += ["", f"**Resolution:** {_md(r.resolution)}"]
        out += ["", "</details>"]
    out.append("")
    return out


def _kind_title(kind: str) -> str:
    return KIND_NAMES.get(kind, kind).capitalize()


def _counted(rows: list[ClaimRow]) -> str:
    return ", ".join(f"{sum(r.verdict == v for r in rows)} {v if v != 'finding' else 'findings'}"
                     for v in VERDICTS if any(r.verdict == v for r in rows) or v == "PASS")


def _list_item(i: int, r: ClaimRow, criterion: bool = True) -> str:
    return (f"- {i} · **{r.verdict}** {_md(r.claim)} *({_md(r.parameters)})*: {_md(r.measured)}"
            + (f"; criterion: {_md(r.criterion)}" if r.criterion and criterion else ""))


def to_markdown(rows: list[ClaimRow], figures: str = "", compact: bool = False) -> str:
    """The claims table as GitHub markdown, laid out for a 1000 px pane.

    Args:
      rows: claim rows (``collect``), numbered in this order.
      figures: the path from the markdown file to figures/ ("" for figures/claims.md, "figures/" for
        the README).
      compact: a notebook's form: the summary line and one narrow table (claim | measured | threshold
        | verdict), no blocks.

    Returns:
      The summary (:func:`summary_markdown`), then the rows grouped by study: each claim and measurement
      a short block, the identities and sanity checks of the study counted apart in a collapsed list.
    """
    if compact:
        return compact_markdown(rows)
    out = [summary_markdown(rows, figures=figures)]
    for study in dict.fromkeys(r.source for r in rows):
        out += _study_section(study, [(i, r) for i, r in _numbered(rows) if r.source == study])
    return "\n".join(out)


#: why the rows of a kind other than claim and measurement are counted apart (collapsed under their study)
_APART = {"identity": "they hold for every routing rule: a check of the code, not of the paper",
          "check": ("they hold for any chain: a check that the code runs as designed, not evidence on the "
                    "paper")}


def _study_section(study: str, mine: list[tuple[int, ClaimRow]]) -> list[str]:
    """One study: its claims as blocks, its measurements as blocks after a lead line, then every other kind
    (identities, sanity checks) counted and listed in a collapsed <details>."""
    out = [f"## {study[:1].upper() + study[1:] if study else 'Rows'}", ""]
    for i, r in mine:
        if r.kind == "claim":
            out += _block(i, r)
    measured = [(i, r) for i, r in mine if r.kind == "measurement"]
    if measured:
        out += ["**Measurements** (numbers the papers do not predict sharply, to a stated precision beside "
                "the theory that approximates them; not counted as evidence):", ""]
        for i, r in measured:
            out += _block(i, r)
    for kind in dict.fromkeys([k for k in KINDS] + [r.kind for _, r in mine]):  # every kind present is shown
        if kind in ("claim", "measurement"):
            continue
        part = [(i, r) for i, r in mine if r.kind == kind]
        if not part:
            continue
        why = _APART.get(kind, "counted apart from the claims")
        out += [f"<details><summary>{_kind_title(kind)} ({why}): {len(part)} row{'s' * (len(part) > 1)}, "
                f"{_counted([r for _, r in part])}</summary>", ""]
        out += [_list_item(i, r, criterion=j == 0 or r.criterion != part[j - 1][1].criterion)
                for j, (i, r) in enumerate(part)]
        out += ["", "</details>", ""]
    return out


def compact_markdown(rows: list[ClaimRow]) -> str:
    """A study's rows in a notebook: the summary line and one table of four narrow columns, claim |
    measured (the key number) | threshold (pre-set) | verdict; every row, numbered in ``rows``' order. The
    whole rows (criterion, wrong models, resolution) are in figures/claims.md and :func:`to_dataframe`."""
    out = [summary(rows), "", "| claim | measured (key number) | threshold (pre-set) | verdict |",
           "|---|---|---|---|"]
    for i, r in _numbered(rows):
        kind = "" if r.kind == "claim" else f" *({r.kind})*"
        out.append(f"| {i} · {_md(_label(r))}{kind}<br>*{_md(where(r))}* | {_md(key_number(r))} | "
                   f"{_md(r.threshold or '—')} | {_verdict_md(r)} |")
    return "\n".join(out) + "\n"


def to_text(rows: list[ClaimRow]) -> str:
    """A compact plain-text table for terminals."""
    lines = [f"{'#':>2}  {'verdict':12}  {'kind':11}  claim  [parameters]  theory | measured"]
    for i, r in enumerate(rows, 1):
        flag = ("" if r.sound or r.verdict != "PASS"
                else "  (not sound: a far wrong model passes too, or too short)")
        lines.append(f"{i:>2}  {r.verdict:12}  {r.kind:11}  {r.claim}  [{r.parameters}]  {r.theory} | "
                     f"{r.measured}{flag}")
    lines.append(summary(rows))
    return "\n".join(lines)



def to_json(rows: list[ClaimRow]) -> str:
    """Every field of every row as JSON: a list of rows, each with its pre-set ``threshold``, its
    ``verdict`` (one of :data:`VERDICTS`) and ``sound`` (:func:`counts` gives the summary).
    Derived numbers as :func:`published` writes them, so the file is the same on every CPU."""
    rows_out = [asdict(r) | {"verdict": r.verdict, "sound": r.sound, "d_pass_range": d_pass_range(r),
                             "d_pass_bands": d_pass_bands(r), "lam_pass_range": lam_pass_range(r)}
                for r in rows]
    return json.dumps(published(rows_out), indent=1, default=str)


#: Significant digits of a derived float as published: CPUs and BLAS builds differ in the last
#: bits (about 1e-16 relative), never in the 6th digit, and no CI here supports more.
PUBLISHED_DIGITS = 6
#: Below this magnitude a derived number is round-off, published as "< 1e-12".
ROUNDOFF = 1e-12
_NUMBER = re.compile(r"(?<![\w.])[-\u2212]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def published(x):
    """A value as the published table writes it, the same on any machine: a float to
    :data:`PUBLISHED_DIGITS` significant digits, a nonzero one below :data:`ROUNDOFF` in
    magnitude as the string "< 1e-12"; in a string, every number printed with more than 10
    significant digits is rounded the same way and every one in e-notation below 1e-12 in
    magnitude becomes "< 1e-12". Lists, tuples and dicts are mapped through; anything else
    (ints, bools, None) is returned as it is."""
    if isinstance(x, bool) or x is None or isinstance(x, int):
        return x
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")) or x == 0.0:
            return x
        return "< 1e-12" if abs(x) < ROUNDOFF else float(f"{x:.{PUBLISHED_DIGITS}g}")
    if isinstance(x, str):
        return _NUMBER.sub(_published_number, x)
    if isinstance(x, dict):
        return {k: published(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [published(v) for v in x]
    return x


def _published_number(m: re.Match) -> str:
    text = m.group(0)
    if "." not in text and "e" not in text.lower():
        return text  # an integer: exact
    value = float(text.replace("\u2212", "-"))
    if "e" in text.lower() and value != 0.0 and abs(value) < ROUNDOFF:
        return "< 1e-12"
    digits = len(re.sub(r"[^0-9]", "", text.lower().split("e")[0]).lstrip("0"))
    if digits <= 10:
        return text
    out = f"{value:.{PUBLISHED_DIGITS}g}"
    return out.replace("-", "\u2212", 1) if text.startswith("\u2212") else out


def to_dataframe(rows: list[ClaimRow], compact: bool = False):
    """The claims table as a tidy pandas DataFrame: one row per table row, numbered as in
    :func:`to_markdown`, with every field (``counterfactuals`` as their count, how many of them
    fail, and their text), the verdict and soundness.

    With ``compact=True``, a notebook's view of its study: the columns claim, measured (the key
    number, :func:`key_number`), threshold and verdict, indexed by the row number."""
    import pandas as pd

    if compact:
        cols = ["claim", "measured", "threshold", "verdict"]
        data = [dict(claim=_label(r) + ("" if r.kind == "claim" else f" ({r.kind})") + f" [{where(r)}]",
                     measured=key_number(r), threshold=r.threshold or "—",
                     verdict=_verdict_md(r).replace("**", "")) for r in rows]
        return pd.DataFrame(data, columns=cols, index=pd.RangeIndex(1, len(rows) + 1, name="number"))
    out = []
    for i, r in enumerate(rows, 1):
        d = {f: getattr(r, f) for f in r.__dataclass_fields__ if f not in ("counterfactuals", "power")}
        d.update(number=i, verdict=r.verdict, sound=r.sound, d_pass_range=d_pass_range(r),
                 power=r.power.text() if r.power is not None else None, wrong_models=len(r.counterfactuals),
                 wrong_models_failing=sum(not c.passed for c in r.counterfactuals),
                 wrong_models_text=_cf_text(r))
        out.append(d)
    cols = ["number", "source", "kind", "claim", "parameters", "start", "taus", "theory", "measured",
            "criterion", "threshold", "verdict", "passed", "sound", "wrong_models", "wrong_models_failing",
            "wrong_models_text", "outcome", "resolution", "reference"]
    df = pd.DataFrame(out)
    if not len(df):
        return pd.DataFrame(columns=cols)
    return df[[c for c in cols if c in df] + [c for c in df if c not in cols]]


def _md(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


__all__ = [
    "summary", "to_markdown", "to_text", "to_json", "to_dataframe", "summary_markdown",
    "compact_markdown", "key_number", "figure_of", "where", "FIGURES", "KIND_NAMES", "published"
]
