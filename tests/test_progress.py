"""qlib._progress: inside study_progress every inner bar reports to one bar (issue 31, item 2:
notebook 03 showed 32 bars, one per simulation)."""

from qlib import _progress as P


def test_inner_bars_join_the_study_bar():
    with P.study_progress("study") as bar:
        for _ in range(3):
            with P.progress_bar(100, show=True, desc="inner") as b:
                assert isinstance(b, P._Child)  # not a bar of its own
                b.update(60)
                b.update(40)
        assert bar.total == 300 and bar.n == 300
    assert not P._STUDY


def test_study_bar_with_a_total_counts_inner_bars_as_fractions():
    with P.study_progress("points", total=2, unit="point") as bar:
        for _x in P.progress_iter(range(4), show=False, desc="inner"):
            pass
        with P.progress_bar(10, show=False, desc="inner") as b:
            b.update(5)
        assert bar.total == 2 and abs(bar.n - 1.5) < 1e-12


def test_nested_study_blocks_share_one_bar():
    with P.study_progress("outer") as outer:
        with P.study_progress("inner") as inner:
            assert inner is outer
            P.progress_bar(7, show=True, desc="x").update(7)
        assert outer.total == 7


def test_outside_a_study_bars_are_as_before():
    assert isinstance(P.progress_bar(10, show=False, desc="x"), P._NoBar)
    assert list(P.progress_iter([1, 2], show=False, desc="x")) == [1, 2]
    b = P.progress_bar(10, show=True, desc="x")
    assert not isinstance(b, P._NoBar)
    b.close()
