"""The command line: python -m qlib reproduce / figures."""

import pytest

from qlib.__main__ import main


def test_cli_rejects_unknown_command():
    with pytest.raises(SystemExit):
        main(["nonsense"])
