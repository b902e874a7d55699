"""The one validated parameter point (issue 20, item 1): each range checked in one place, the
arrival rate kept as given, equal points for equal parameters, and every entry point taking
and returning it without changing a number."""

import math
import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest

import qlib.supermarket as sm
from qlib.supermarket import chain as K
from qlib.supermarket.point import LAM_RESOLUTION, MAX_N, Point, as_point


def test_keeps_the_rate_it_was_given():
    p = Point(10, 2, 0.99)
    assert (p.lam, p.one_minus_lam, p.given) == (0.99, 1.0 - 0.99, "lam")
    assert p.rate == {"lam": 0.99} and p.one_minus_lam_given is None
    q = Point(10, 2, one_minus_lam=1e-12)
    assert q.one_minus_lam == 1e-12 and q.lam == 1.0 - 1e-12 and q.one_minus_lam_given == 1e-12
    assert q.rate == {"one_minus_lam": 1e-12}
    assert q.as_tuple() == (10, 2, 1e-12)
    assert Point(None, 3, 0.5).n is None


def test_equal_parameters_make_equal_points_and_keys():
    a, b = Point(100, np.int64(5), np.float64(0.9)), Point(100.0, 5, 0.9)
    assert (
        a == b
        and hash(a) == hash(b)
        and a.cache_params() == b.cache_params() == {"n": 100, "d": 5, "lam": 0.9}
    )
    assert Point(4, 2, 0.5, replacement=False).cache_params()["replacement"] is False
    assert Point(100, 5, 0.9) != Point(100, 5, one_minus_lam=0.1)  # given differently: another float
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError
        a.n = 3  # frozen


@pytest.mark.parametrize("args,kw,name", [
    ((0, 2, 0.5), {}, "n"), ((2**63, 2, 0.5), {}, "n"), ((10, 0, 0.5), {}, "d"),
    ((10, 2, 1.0), {}, "lam"), ((10, 2, float("nan")), {}, "lam"), ((10, 2, True), {}, "lam"),
    ((10, 2), {"one_minus_lam": 0.0}, "one_minus_lam"), ((10, 2, 0.5), {"one_minus_lam": 0.5}, "lam"),
    ((10, 2, 0.5), {"replacement": "no"}, "replacement"), ((3, 4, 0.5), {"replacement": False}, "d"),
    ((None, 2, 0.5), {"replacement": False}, "n"),
])
def test_model_ranges_are_checked_by_the_point(args, kw, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        Point(*args, **kw)


def test_simulation_range_is_a_separate_check():
    big = Point(2**40, 2, 0.5)  # a valid model point (the theory takes any n)
    with pytest.raises(ValueError, match=r"\bn\b.*4294967295"):
        big.simulable()
    with pytest.raises(ValueError, match=r"\bn\b"):
        Point.simulation(MAX_N + 1, 0, 0.5)  # n is named first, as simulate always did
    tiny = Point(10, 2, one_minus_lam=LAM_RESOLUTION / 2)
    with pytest.raises(ValueError, match=r"\bone_minus_lam\b.*2\^-43"):
        tiny.simulable()
    with pytest.raises(ValueError, match="pass one_minus_lam"):
        Point.simulation(10, 2, 1 - 2.0**-50)
    assert Point.simulation(MAX_N, 2, one_minus_lam=LAM_RESOLUTION).n == MAX_N


def test_one_validator_per_range():
    """Point is the one way to validate a point: the older tuple validators are gone."""
    out = subprocess.run(
        ["grep", "-rn", r"def check_parameters\|def check_point", "qlib"],
        capture_output=True,
        text=True,
        cwd=str(Path(__file__).resolve().parents[1]),
    ).stdout.splitlines()
    assert out == [], out


def test_as_point_and_threshold():
    p = Point(50, 3, 0.9)
    assert as_point(p) is p and as_point(50, 3, 0.9) == p
    with pytest.raises(ValueError, match="leave d"):
        as_point(p, 3)
    with pytest.raises(ValueError, match="replacement"):
        as_point(p, replacement=False)
    # the lane parameters of a Point are those of the plain tuple (the older interface)
    assert K.point_params(p) == K.point_params((50, 3, 0.9))
    assert p.arrival_threshold == K.arrival_threshold(0.9) == K.arrival_threshold(one_minus_lam=1.0 - 0.9)
    q = Point(50, 3, one_minus_lam=1e-9)
    assert q.arrival_threshold == K.arrival_threshold(one_minus_lam=1e-9)
    assert p.steps_per_time == (1.0 + 0.9) * 50


def test_every_entry_point_takes_a_point_and_results_carry_it():
    p = Point(30, 3, 0.8)
    r = sm.simulate(p, steps=2000, replicas=2, seed=1)
    r0 = sm.simulate(30, 3, 0.8, steps=2000, replicas=2, seed=1)
    assert r.point == r0.point == p and (r.n, r.d, r.lam, r.one_minus_lam, r.replacement) == (
        30,
        3,
        0.8,
        1.0 - 0.8,
        True,
    )
    np.testing.assert_array_equal(r.tail_fraction, r0.tail_fraction)
    many = sm.simulate_many([p, (30, 3, 0.8)], steps=2000, replicas=2, seeds=[1, 1])
    np.testing.assert_array_equal(many[0].tail_fraction, many[1].tail_fraction)
    np.testing.assert_array_equal(many[0].tail_fraction, r.tail_fraction)
    q = Point(30, 3, one_minus_lam=0.2)
    assert sm.simulate(q, steps=100).point.one_minus_lam == 0.2
    np.testing.assert_array_equal(
        sm.meeting_times(p, replicas=3, seed=0, top_length=4, max_steps=10**5),
        sm.meeting_times(30, 3, 0.8, replicas=3, seed=0, top_length=4, max_steps=10**5),
    )
    assert sm.coupled_paths(p, starts=["empty"], steps=10, replicas=1, seed=0).point == p
    assert sm.predicted_max_length(p) == sm.predicted_max_length(3, 0.8)
    np.testing.assert_array_equal(
        sm.fluid_fixed_point(q, levels=4), sm.fluid_fixed_point(3, levels=4, one_minus_lam=0.2)
    )
    e = sm.estimate_equilibrium(p, batches=2, replicas=2, burn_in="tau", progress=False)
    assert e.point == p and (e.n, e.d, e.lam) == (30, 3, 0.8)
    nr = Point(30, 3, 0.8, replacement=False)
    assert sm.simulate(nr, steps=100).replacement is False
    assert math.isfinite(sm.predicted_max_length(nr))
