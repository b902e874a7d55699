"""qlib.studies.who_works_the_most (notebook 03): the slider function and the study's shape."""

import numpy as np
import pytest

from qlib.studies import who_works_the_most as study


def test_profile_for_sliders():
    p = study.profile(6, 20.0, 0.8)
    assert p.n == 6 and p.mus[0] == pytest.approx(20) and p.mus[-1] == pytest.approx(1)
    assert abs(p.work.sum() - p.lam) < 1e-12 * p.lam
    assert np.all(np.diff(p.busy) > 0) and np.all(np.diff(p.work) < 0) and p.band_ok()
    # informed customers make the fastest server the busiest
    assert p.informed_busy[0] > p.busy[0]
    assert study.profile(40, 100.0, 0.5).informed_busy is None
    with pytest.raises(ValueError, match="rho"):
        study.profile(3, 2.0, 1.0)
    with pytest.raises(ValueError, match="spread"):
        study.profile(3, 0.5, 0.5)


def test_study_shape_and_smoke_claim_rows():
    assert set(study.PARAMETERS) == {"full", "smoke"}
    result = study.run("smoke", progress=False)
    assert len(result.profiles) == len(result.sims) == len(study.PARAMETERS["smoke"]["figures"]["loads"])
    rows = study.claim_rows(result)
    assert len(rows) == 6
    failed = [(r.claim, r.measured) for r in rows if not r.passed]
    assert not failed, failed
