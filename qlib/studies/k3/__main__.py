"""``python -m qlib.studies.k3``: print the design, its hypotheses per point and its cost here.

``python -m qlib.studies.k3 run mixing`` (or ``maximum``): the long tier of one set only, so the two
sets can run in two processes side by side (each set's one-chain pieces use one core); ``make
results-long ONLY=k3`` then finds every piece stored and computes nothing.
"""

import sys

from qlib.studies.k3.parameters import PARAMETERS, design_text

if __name__ == "__main__":
    print(design_text(PARAMETERS["full"]), flush=True)
    if sys.argv[1:2] == ["run"]:
        from qlib.runner import long  # the long tier is the runner's (this __main__ is an entry point)
        from qlib.studies.k3.compute import run

        sets = tuple(sys.argv[2:]) or ("mixing", "maximum")
        long.run_long([("qlib.studies.k3", lambda: run("full", only=sets))], scale=1.0)
