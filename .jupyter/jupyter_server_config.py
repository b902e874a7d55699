"""JupyterLab for this repository (``make lab``; docs/notebooks.md).

``make lab`` puts this folder on JUPYTER_CONFIG_PATH, so it adds to (never replaces) the user's
own Jupyter configuration:
- the notebooks are the MyST sources ``notebooks/NN_*.md``: a double click opens them as
  notebooks (jupytext's viewer, set in ``lab/settings/overrides.json``);
- the executed copies ``notebooks/NN_*.ipynb`` are written by ``make figures`` only: saving them
  from JupyterLab is refused with a message, so autosave cannot rewrite a tracked output.
"""

import os
import sys

c = get_config()  # noqa: F821  (provided by Jupyter when it loads this file)

HERE = os.path.dirname(os.path.abspath(__file__))
c.LabApp.app_settings_dir = os.path.join(HERE, "lab", "settings")
c.ServerApp.root_dir = os.path.dirname(HERE)
# named by import path: this file is read once per server extension, the hook is imported once
sys.path.insert(0, HERE)
c.FileContentsManager.pre_save_hook = "qlib_lab_hooks.refuse_executed_copies"
