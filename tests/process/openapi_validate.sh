#!/usr/bin/env bash
# Validates docs/openapi.json with a real OpenAPI validator (validate-api, npm's
# @seriousme/openapi-schema-validator, which scripts/setup.sh installs), and checks that the
# validator rejects a broken copy of it (so a validator that accepts anything fails here).
# Exit codes: 0 valid, 1 invalid, 77 skipped (no validate-api).
set -euo pipefail
doc=${1:?usage: openapi_validate.sh docs/openapi.json}
validator=$(command -v validate-api || true)
if [[ -z $validator ]]; then
  echo "SKIPPED: validate-api not found (npm install -g @seriousme/openapi-schema-validator;" \
    "scripts/setup.sh does)"
  exit 77
fi
if ! out=$("$validator" "$doc" 2>&1); then
  echo "FAILED: $doc is not a valid OpenAPI document:"
  echo "$out"
  exit 1
fi
broken=$(mktemp --suffix=.json)
trap 'rm -f "$broken"' EXIT
# A response without its required description.
sed 's/"description": "the OpenAPI document"/"summary": "the OpenAPI document"/' "$doc" >"$broken"
if cmp -s "$doc" "$broken" || "$validator" "$broken" >/dev/null 2>&1; then
  echo "FAILED: the validator did not reject a broken copy of $doc"
  exit 1
fi
echo "$doc: valid OpenAPI (validate-api); a broken copy is rejected"
