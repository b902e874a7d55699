"""qlib.studies.perfect (notebook 04): the smoke run, its rows, prose and the slider callback.

The exactness of the sampler itself is tested in tests/test_supermarket_perfect.py against the
exact law; here: the study's numbers are those of the functions it wraps, its rows fail when the
biased sampler is put in place of the perfect one, and its prose quotes its result.
"""

import dataclasses

import numpy as np
import pytest

from qlib import runner
from qlib.studies import perfect as study
from qlib.supermarket import perfect_samples


@pytest.fixture(scope="module")
def result(fresh_cache):
    return runner.run(study, "smoke", progress=False)


def test_rows_pass_and_would_fail_with_the_biased_sampler(result):
    rows = study.claim_rows(result)
    assert [r.verdict for r in rows] == ["PASS"] * len(rows)
    e = result.exactness
    # the same criterion with the biased sampler's p-value in place of the perfect one's
    wrong = dataclasses.replace(result, exactness=dataclasses.replace(e, p_value=e.biased_p))
    assert all(r.verdict == "FAIL" for r in study.claim_rows(wrong) if r.kind == "identity")


def test_cost_points_are_the_perfect_samples_of_their_seeds(result):
    c = result.cost
    j = 0
    seed = study._seed(study.PARAMETERS["smoke"]["seed"], "cost", j)
    r = perfect_samples(int(c.n[j]), int(c.d[j]), float(c.lam[j]), capacity=int(c.capacity[j]),
                        replicas=c.coalescence.shape[1], seed=seed)
    np.testing.assert_array_equal(r.coalescence_steps, c.coalescence[j])
    assert np.all(c.coalescence >= (c.n * c.capacity)[:, None])


def test_max_law_is_a_law_with_intervals_around_it(result):
    m = result.max_law
    assert m.max_law.sum() == pytest.approx(1.0)
    assert np.all(m.max_low <= m.max_law) and np.all(m.max_law <= m.max_high)


def test_findings_and_cost_table_quote_the_result(result):
    text = study.findings(result)
    m = result.max_law
    k = int(m.k)
    assert f"P(max = {k}) = {m.max_law[k]:.2f}" in text
    assert f"p = {result.exactness.p_value[0]:.2f}" in text
    table = study.cost_table(result)
    assert table.count("\n") == 1 + result.cost.n.size


def test_explore_is_the_perfect_sampler():
    x = study.explore(20, 2, 0.8, 3, replicas=16, seed=4)
    r = perfect_samples(20, 2, 0.8, capacity=3, replicas=16, seed=4)
    np.testing.assert_array_equal(x.samples, r.counts)
    assert x.max_law.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="capacity"):
        study.explore(20, 2, 0.8, 0)


def test_summary_is_the_cost_table_as_numbers(result):
    """summary(result): one row per cost point, values equal to the result's fields."""
    df = study.summary(result)
    c = result.cost
    assert list(df.columns) == list(study.SUMMARY_COLUMNS) and len(df) == c.n.size
    assert np.array_equal(df.n, c.n) and np.array_equal(df.lam, c.lam) and np.array_equal(df.burn_in_steps,
                                                                                          c.burn_in)
    assert np.array_equal(df.perfect_steps, 2 * c.steps_run.mean(axis=1))
    assert np.array_equal(df.certificate_steps, 2 * c.forward.max(axis=1))
    assert np.array_equal(df.coalescence_taus, c.coalescence.mean(axis=1) / (c.tau * (1 + c.lam) * c.n))
    for row in df.itertuples():  # the cheapest is the smallest of the three, as the cost table says
        assert row.cheapest in study.cost_table(result).splitlines()[2 + row.Index]


def test_every_row_threshold_is_rendered_from_parameters_claims(result):
    """Each number in a smoke row's pre-set threshold is a value under PARAMETERS["smoke"]["claims"]."""
    from test_claim_specs import numbers_not_from_claims

    assert numbers_not_from_claims(study.claim_rows(result), study.PARAMETERS["smoke"]) == []
