"""The save hook of ``make lab`` (.jupyter/jupyter_server_config.py): the executed copies
``notebooks/NN_*.ipynb`` are written by ``make figures`` only, so JupyterLab may not save them."""

import fnmatch

EXECUTED = "notebooks/[0-9][0-9]_*.ipynb"


def refuse_executed_copies(model, path, contents_manager, **kwargs):
    """Refuse (HTTP 403, with the reason) to save an executed copy; any other file saves."""
    path = path.lstrip("/")
    if fnmatch.fnmatch(path, EXECUTED):
        from tornado.web import HTTPError

        raise HTTPError(
            403,
            f"{path} is the executed copy that `make figures` writes; open and run "
            f"{path[: -len('.ipynb')]}.md instead (docs/notebooks.md)",
        )
