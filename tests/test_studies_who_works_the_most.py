"""Tests for the "who works the most?" study (Cabral's heterogeneous servers): the slider
function of notebook 03. Moved unchanged from tests/test_heterogeneous.py; the imports follow
qlib.heterogeneous.explore when it moves to qlib/studies/."""

from __future__ import annotations

import numpy as np
import pytest

import qlib.heterogeneous as H


# ----------------------------------------------------------------------------- slider function
def test_profile_for_sliders():
    p = H.profile(6, 20.0, 0.8)
    assert p.n == 6 and p.mus[0] == pytest.approx(20) and p.mus[-1] == pytest.approx(1)
    assert abs(p.work.sum() - p.lam) < 1e-12 * p.lam
    assert np.all(np.diff(p.busy) > 0) and np.all(np.diff(p.work) < 0) and p.band_ok()
    # informed customers make the fastest server the busiest
    assert p.informed_busy[0] > p.busy[0]
    assert H.profile(40, 100.0, 0.5).informed_busy is None
    with pytest.raises(ValueError, match="rho"):
        H.profile(3, 2.0, 1.0)
    with pytest.raises(ValueError, match="spread"):
        H.profile(3, 0.5, 0.5)
