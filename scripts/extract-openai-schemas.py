#!/usr/bin/env python3
"""Extract the OpenAI schemas sluice's translation tests validate against: the answers an
OpenAI client gets, and the request bodies sluice sends an OpenAI-compatible upstream.

Usage:
    python3 scripts/extract-openai-schemas.py OPENAPI_YAML [OUT_JSON]

OPENAPI_YAML is `openapi.yaml` of the public openai/openai-openapi repository (the tests'
copy came from commit f85dbe223d40e1a31cba812ab2d755c7e98a92a3, spec version 2.3.0).
OUT_JSON defaults to tests/fixtures/openai-schema/openai-answers.schema.json.

Needs PyYAML (`pip install pyyaml`): the script is run by hand when the spec is updated, and
its output is checked in, so neither the tests nor CI run it.

The output is one JSON Schema 2020-12 document: every component schema named in ROOTS (the
answers: `Response`, the stream events, chat completions and chunks, `ErrorResponse`; the
requests: `CreateChatCompletionRequest`, `CreateResponse`) plus everything they `$ref`,
transitively, under `$defs`, with `#/components/schemas/X` rewritten to `#/$defs/X`.
Documentation-only keywords (string `description`, `example(s)`, `x-*` vendor extensions,
`discriminator`) are dropped to keep the file small; they do not affect validation. A few
schemas still carry OpenAPI 3.0's `nullable: true`, which JSON Schema 2020-12 ignores; read
literally, the real API's own chunks (`"finish_reason": null`) would be invalid, so such a
schema S becomes `{"anyOf": [S, {"type": "null"}]}`, as the SDKs generated from the spec read
it (the count is printed on stderr). Draft 2019-09's `$recursiveAnchor: true` /
`$recursiveRef: "#"` (a filter that nests itself) become a `$ref` to the component itself.
`x-sluice-events` maps each Responses stream event `type` to the schema of that event (from
`ResponseStreamEvent`'s members).
"""

import json
import sys
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover - run by hand
    sys.exit("PyYAML is required: pip install pyyaml")

ROOTS = [
    "Response",
    "ResponseStreamEvent",
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "ErrorResponse",
    "CreateChatCompletionRequest",
    "CreateResponse",
]
PREFIX = "#/components/schemas/"
# Keywords whose value is a map from names to schemas (its keys are not keywords).
NAMED_MAPS = {"properties", "patternProperties", "$defs", "dependentSchemas"}
DROP = {"example", "examples", "discriminator"}


def clean(node, name, refs, stats):
    """A copy of component `name`'s schema `node` without documentation keywords, with refs
    rewritten and collected in `refs`."""
    if isinstance(node, list):
        return [clean(x, name, refs, stats) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k in DROP or k.startswith("x-") or (k == "description" and isinstance(v, str)):
            continue
        if k == "$recursiveAnchor":
            continue
        if k == "$recursiveRef":
            if v != "#":
                sys.exit(f"unsupported $recursiveRef {v!r} in {name}")
            out["$ref"] = "#/$defs/" + name
        elif k == "$ref":
            if not v.startswith(PREFIX):
                sys.exit(f"unsupported $ref {v!r}")
            target = v[len(PREFIX):]
            refs.add(target)
            out[k] = "#/$defs/" + target
        elif k in NAMED_MAPS and isinstance(v, dict):
            out[k] = {p: clean(s, name, refs, stats) for p, s in v.items()}
        else:
            out[k] = clean(v, name, refs, stats)
    if out.pop("nullable", False) is True:
        stats["nullable"] += 1
        return {"anyOf": [out, {"type": "null"}]}
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    src = Path(sys.argv[1])
    dst = Path(sys.argv[2]) if len(sys.argv) == 3 else (
        Path(__file__).resolve().parent.parent
        / "tests/fixtures/openai-schema/openai-answers.schema.json"
    )
    with src.open(encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    schemas = spec["components"]["schemas"]
    defs, todo, stats = {}, list(ROOTS), {"nullable": 0}
    while todo:
        name = todo.pop()
        if name in defs:
            continue
        if name not in schemas:
            sys.exit(f"no component schema {name!r}")
        refs = set()
        defs[name] = clean(schemas[name], name, refs, stats)
        todo.extend(sorted(refs - defs.keys()))
    events = {}
    for member in schemas["ResponseStreamEvent"]["anyOf"]:
        name = member["$ref"][len(PREFIX):]
        for t in schemas[name]["properties"]["type"]["enum"]:
            events[t] = name
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": (
            f"Extracted by scripts/extract-openai-schemas.py from the OpenAI OpenAPI spec "
            f"{spec['info']['version']} (openai/openai-openapi openapi.yaml); see README.md "
            f"beside this file. Do not edit by hand."
        ),
        "x-sluice-roots": ROOTS,
        "x-sluice-events": dict(sorted(events.items())),
        "$defs": dict(sorted(defs.items())),
    }
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(
        f"{dst}: {len(defs)} schemas, {len(events)} event types, "
        f"{stats['nullable']} 'nullable' keywords",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
