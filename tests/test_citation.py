"""Citation metadata: CITATION.cff is valid CFF 1.2.0 and says what qlib/citation.py, the README's
bibtex block and ``python -m qlib cite`` say (issue 49, item 4).

The schema is the CFF 1.2.0 JSON schema as cffconvert 2.0.0 ships it (tests/data/, CC-BY-4.0,
citation-file-format), vendored so the check runs offline; ``cffconvert --validate`` gives the
same verdict.
"""

import datetime
import json
import re

import jsonschema
import tomllib
import yaml

from qlib import __main__ as cli
from qlib import citation
from qlib.config import ROOT

SCHEMA = json.loads((ROOT / "tests" / "data" / "citation-cff-1.2.0.schema.json").read_text())


def _cff(text: str | None = None) -> dict:
    data = yaml.safe_load(text if text is not None else (ROOT / "CITATION.cff").read_text())

    def strings(x):  # YAML reads 2026-12-07 as a date; CFF (and its schema) mean the string
        if isinstance(x, datetime.date):
            return x.isoformat()
        if isinstance(x, dict):
            return {k: strings(v) for k, v in x.items()}
        return [strings(v) for v in x] if isinstance(x, list) else x

    return strings(data)


def _errors(data: dict) -> list[str]:
    return [e.message for e in jsonschema.Draft7Validator(SCHEMA).iter_errors(data)]


def test_citation_cff_is_valid():
    assert _errors(_cff()) == []


def test_the_schema_check_can_fail():
    text = (ROOT / "CITATION.cff").read_text()
    assert _errors(_cff(re.sub(r"(?m)^authors:\n  - name: .*\n", "", text)))  # authors are required
    assert _errors(_cff(text.replace("doi: 10.1007/", "doi: 11.1007/")))      # not a DOI


def test_citation_cff_agrees_with_the_package():
    cff = _cff()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cff["version"] == citation.SOFTWARE["version"] == project["version"]
    assert cff["license"] == citation.SOFTWARE["license"] == project["license"]["text"]
    assert cff["title"] == citation.SOFTWARE["title"]
    assert cff["date-released"] == citation.SOFTWARE["date"]
    assert [r["title"] for r in cff["references"]] == [p["title"] for p in citation.PAPERS]
    for ref, paper in zip(cff["references"], citation.PAPERS):
        assert str(ref["year"]) == paper["year"]
        assert [a["family-names"] for a in ref["authors"]] == \
            [a.split(",")[0] for a in paper["author"].split(" and ")]
        if "doi" in paper:
            assert ref["doi"] == paper["doi"]
        else:
            assert ref["identifiers"][0]["value"] == f"arXiv:{paper['eprint']}"


def test_cite_prints_the_bibtex(capsys):
    assert cli.main(["cite"]) == 0
    out = capsys.readouterr().out
    assert out == citation.bibtex()
    keys = re.findall(r"^@(\w+)\{(\w+),", out, flags=re.M)
    assert keys == [("software", "qlib_queues"), ("misc", "brightwell2012supermarket"),
                    ("article", "brightwell2018bounded"), ("misc", "cabral2007heterogeneous")]
    assert out.count("{") == out.count("}")


def test_readme_bibtex_is_the_cite_output():
    block = re.search(r"## How to cite.*?```bibtex\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert block and block.group(1) == citation.bibtex()
