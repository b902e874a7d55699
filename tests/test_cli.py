"""The command line: python -m qlib reproduce / figures."""

import pytest

from qlib.__main__ import main


def test_cli_rejects_unknown_command():
    with pytest.raises(SystemExit):
        main(["nonsense"])


def test_exit_status_is_2_with_a_one_line_message_on_error(capsys, monkeypatch):
    from qlib import runner

    def broken(*a, **k):
        raise OSError("disk on fire\nsecond line")

    monkeypatch.setattr(runner, "collect", broken)
    assert main(["reproduce", "--quick"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["qlib: error: OSError: disk on fire"]


def test_exit_status_1_when_a_claim_fails_and_0_when_all_pass(monkeypatch, tmp_path):
    from qlib import claims, runner

    ok = claims.ClaimRow("c", "p", "t", "m", True, kind="identity")
    bad = claims.ClaimRow("c", "p", "t", "m", False, kind="identity")
    monkeypatch.setattr(runner, "collect", lambda *a, **k: [ok, bad])
    assert main(["reproduce", "--quick"]) == 1
    monkeypatch.setattr(runner, "collect", lambda *a, **k: [ok])
    assert main(["reproduce", "--quick", "--markdown", str(tmp_path / "t.md")]) == 0
    assert (tmp_path / "t.md").read_text().count("PASS") >= 1
    # INCONCLUSIVE rows and findings are counted, not failed: exit 0
    unsure = claims.ClaimRow("c", "p", "t", "m", False, outcome="INCONCLUSIVE")
    seen = claims.ClaimRow("c", "p", "t", "m", False, outcome="finding")
    monkeypatch.setattr(runner, "collect", lambda *a, **k: [ok, unsure, seen])
    assert main(["reproduce", "--quick"]) == 0


def test_bad_scale_is_rejected_before_any_work(monkeypatch, capsys):
    from qlib import runner

    monkeypatch.setattr(runner, "collect", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    monkeypatch.delenv("QLIB_SCALE", raising=False)
    assert main(["reproduce", "--scale", "-1"]) == 2
    assert "--scale" in capsys.readouterr().err
    assert "QLIB_SCALE" not in __import__("os").environ


def test_unwritable_output_fails_before_computing(monkeypatch, tmp_path, capsys):
    from qlib import runner

    monkeypatch.setattr(runner, "collect", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["reproduce", "--markdown", str(blocker / "claims.md")]) == 2
    assert "not writable" in capsys.readouterr().err
