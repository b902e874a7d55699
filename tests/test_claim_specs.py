"""Every study's claims as data (issue 28): each study opens with PARAMETERS (both modes) and a
CLAIMS table of ClaimSpecs; every threshold a row is judged by lives under PARAMETERS[mode]["claims"]
and is rendered from there into the row's criterion and threshold text; wrong models are named by
their key in the one registry.

These checks are mechanical (they read the specs and their templates, not a run): a threshold
path that does not resolve, a wrong model that is not a registry key, a number typed into a
template, or a template that ignores its threshold's value fails them. The rows themselves are
checked against the same rule in the study tests, on their smoke results
(:func:`numbers_not_from_claims`).
"""

from __future__ import annotations

import copy
import re
import string
from fractions import Fraction

import pytest

from qlib import claims, runner
from qlib.supermarket.variants import VARIANTS, WRONG_MODELS, kernel_name

STUDIES = runner.STUDIES
MODES = ("smoke", "full")

# a number in a text: not part of a name (u_1, H0, d^(k-1), k+1, 1-lam) nor a percentage (95%)
_NUMBER = re.compile(r"(?<![\w^.+\-/])(\d+(?:\.\d+)?(?:e-?\d+)?(?:/\d+)?)(?![\w%^/.]|[-+]\w|\))")
#: numbers of the theory (not thresholds) that the criterion templates state, each with its reason
THEORY = {
    "max(1/2, 1 - 2c)": "the bound of Brightwell, Fairthorne & Luczak: the fraction at k >= max(1/2, 1 - 2c)",
    "1 - slack": "the bound 1 - slack (1-lam) d^(k-1): the 1 is the whole, slack the threshold",
    "<= 1/4 + 2 SE": "the lower-bound run's crossing rule (PARAMETERS[mode]['lower']['threshold'], a run "
                     "parameter)",
    "d_TV <= 1/4": "the definition of the mixing time",
    "bound 1 - ": "the bound 1 - slack (1-lam) d^(k-1) rendered",
    "k - 1": "the exponent the mixing claim states",
    "> 0": "the sign a claim states (a margin above zero)",
    "above 0": "the sign a claim states",
    "1 +- ": "a ratio measured/predicted that the claim states is 1 (the prediction itself); the band around "
             "it is the threshold, a field",
    "1 + 2 sum rho": "Sokal's definition of the integrated autocorrelation time",
    "(about 5 standard errors)": "a gloss on the identity's tolerance in the table's wording (kept: "
                                 "claims.json's bytes do not change in issue 28)",
}


def numbers(text: str) -> list[Fraction]:
    """The numbers typed in ``text``, outside the theory's own (:data:`THEORY`)."""
    for phrase in THEORY:
        text = text.replace(phrase, " ")
    return [Fraction(m) if "/" in m else Fraction(float(m)).limit_denominator(10**9)
            for m in _NUMBER.findall(text)]


def claim_values(parameters: dict) -> set[Fraction]:
    """Every number under ``parameters["claims"]`` (tuples and nested dicts included)."""
    out: set[Fraction] = set()

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.add(Fraction(float(v)).limit_denominator(10**9))

    walk(parameters["claims"])
    return out


def numbers_not_from_claims(rows, parameters: dict) -> list[tuple[str, Fraction]]:
    """(threshold text, number) of every number in a row's pre-set threshold that is not a value
    under ``parameters["claims"]``: empty when every threshold was rendered from there."""
    allowed = claim_values(parameters)
    return [(r.threshold, x) for r in rows for x in numbers(r.threshold) if x not in allowed]


def _specs():
    for title, m in STUDIES.items():
        for key, spec in m.CLAIMS.items():
            yield pytest.param(title, m, key, spec, id=f"{m.__name__.split('.')[-1]}:{key}")


@pytest.mark.parametrize("title", list(STUDIES))
def test_every_study_has_parameters_with_claims_and_a_claims_table(title):
    m = STUDIES[title]
    assert set(m.PARAMETERS) == set(MODES), title
    for mode in MODES:
        assert isinstance(m.PARAMETERS[mode]["claims"], dict), (title, mode)
    assert isinstance(m.CLAIMS, dict) and m.CLAIMS, title
    for key, spec in m.CLAIMS.items():
        assert isinstance(spec, claims.ClaimSpec) and spec.key == key, (title, key)


@pytest.mark.parametrize("title, m, key, spec", list(_specs()))
def test_threshold_paths_resolve_under_claims_in_both_modes(title, m, key, spec):
    for mode in MODES:
        values = spec.values(m.PARAMETERS[mode])  # KeyError if a path does not resolve under claims
        assert len(values) == len(spec.thresholds), "two thresholds share the last name of their paths"
        assert set(spec.threshold_values(m.PARAMETERS[mode])) == {".".join(p) for p in spec.thresholds}


@pytest.mark.parametrize("title, m, key, spec", list(_specs()))
def test_templates_type_no_threshold_and_use_every_field_they_name(title, m, key, spec):
    """A template names its thresholds as fields; a number typed into it is a theory constant."""
    names = {p[-1] for p in spec.thresholds}
    for template in (spec.criterion, spec.threshold):
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
        bare = re.sub(r"\{[^}]*\}", " ", template)
        assert numbers(bare) == [], (key, template)
        # a field is a threshold or a value the row supplies (its point): never an unknown name
        assert fields <= names | {"rel_error", "min_taus", "times", "b2", "b3", "residual"}, (key, fields)


def _perturbed(parameters: dict) -> dict:
    """A copy of ``parameters`` whose every number under claims is changed."""
    p = copy.deepcopy(parameters)

    def bump(v):
        if isinstance(v, dict):
            return {k: bump(x) for k, x in v.items()}
        if isinstance(v, tuple):
            return tuple(bump(x) for x in v)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return v * 3 + 7
        return v

    p["claims"] = bump(p["claims"])
    return p


_ROW_FIELDS = dict(rel_error=0.25, min_taus=100.0, times="twice", b2="1/4", b3="1/8", residual="1e-9")


@pytest.mark.parametrize("title, m, key, spec", list(_specs()))
def test_texts_are_rendered_from_the_threshold_values(title, m, key, spec):
    """Change the values under claims: every template that names a threshold renders differently,
    and a template that names none renders the same (it typed no threshold)."""
    for mode in MODES:
        P = m.PARAMETERS[mode]
        Q = _perturbed(P)
        for render, template in ((spec.criterion_text, spec.criterion),
                                 (spec.threshold_text, spec.threshold)):
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
            uses = bool(fields & {p[-1] for p in spec.thresholds})
            assert (render(P, **_ROW_FIELDS) != render(Q, **_ROW_FIELDS)) == uses, (key, template)


@pytest.mark.parametrize("title, m, key, spec", list(_specs()))
def test_wrong_models_are_registry_keys(title, m, key, spec):
    registry = getattr(m, "WRONG_RULES", None) or WRONG_MODELS
    assert set(spec.wrong_models) <= set(registry), (key, set(spec.wrong_models) - set(registry))
    assert not set(spec.controls) & set(WRONG_MODELS), "a registry model is a wrong model, not a control"


def test_the_registry_points_at_kernel_variants():
    """Each entry that runs a kernel variant names one the kernel has; VARIANTS is derived from the
    registry, so no kernel variant lacks an entry (d_offset, the generic d shift, aside)."""
    for key, m in WRONG_MODELS.items():
        for v in (m.variant, m.kernel):
            if v is not None:
                assert kernel_name(v) in VARIANTS, (key, v)
        assert m.far == (m.kernel is None and m.variant is None and not m.flip), key
    assert {kernel_name(m.kernel) for m in WRONG_MODELS.values() if m.kernel} | {"d_offset"} == set(VARIANTS)


def test_numbers_not_from_claims_finds_a_typed_threshold():
    """The row check can fail: a threshold text with a number not under claims is reported."""
    P = {"claims": {"p_min": 0.9, "band": (25.0, 45.0), "h": {"c_max": 0.5}}}
    ok = claims.ClaimRow("c", "p", "t", "m", True, threshold="P(max = k) >= 0.9, lower 95% end, k-1, 45, 0.5")
    bad = claims.ClaimRow("c", "p", "t", "m", True, threshold="ratio >= 0.2 at every n")
    assert numbers_not_from_claims([ok], P) == []
    assert numbers_not_from_claims([bad], P) == [("ratio >= 0.2 at every n", Fraction(1, 5))]
    assert numbers("1/4 and 1/8 + 1.96 binomial SE") == [Fraction(1, 4), Fraction(1, 8), Fraction(49, 25)]
