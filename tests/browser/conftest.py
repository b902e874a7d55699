# The browser test is a script (`make browser-test`), not a pytest test: it needs Chromium and
# a JupyterLab server and takes minutes. Its file name ends in _test.py, which pytest's default
# discovery would pick up, so keep it out of collection explicitly.
collect_ignore = ["run_browser_test.py", "run_book_test.py"]
