"""Write charts/vk-provider/README.md from the chart's values.schema.json and values.yaml.

The schema is where every value is described (Helm checks values against it), values.yaml is where
the defaults are: the README's table is both, so it never lists a value the chart does not take or a
stale default. `python -m vk_devtools.chartreadme` rewrites it; `--check` says whether it is current
(tests/unit/devtools/test_chart_readme.py does the same).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "vk-provider"
README = CHART / "README.md"
COMMAND = "python -m vk_devtools.chartreadme"

INTRO = """\
# The vk-provider chart

<!-- Written by `{command}` from values.schema.json and values.yaml: edit those, then run it. -->

Virtual nodes that run pods at GPU clouds (RunPod, AWS SageMaker, a remote Kubernetes cluster, plugins
over gRPC), the router that splits each Offload's traffic between home and away by weight, and the
migration controller that moves it, step by step.

By default the chart installs the router, the controller, and the node daemons' ServiceAccount and
RBAC, and **no virtual node**: a node advertises capacity to the scheduler, so it exists only once
`nodes` says what it runs on. `examples/` has a values file for each provider.

```sh
kubectl create namespace vk-provider-system
kubectl -n vk-provider-system create secret generic runpod-credentials \\
  --from-literal=runpod-api-key="$RUNPOD_API_KEY"
helm install vk-provider charts/vk-provider -n vk-provider-system -f charts/vk-provider/examples/runpod.yaml
kubectl get nodes runpod-burst
```

## Credentials

Every credential is a Secret you create, named by an `existingSecret` value and mounted optional:

- a node's provider keys: `nodes[].existingSecret` (`name`, and `keys` to mount only some), as files
  under `/etc/vk-provider/credentials`; point the provider's `*_file` settings there. A node whose
  Secret is missing starts anyway and says so on its Node: condition `ProviderAvailable=False`,
  reason `CredentialsMissing`, and a Warning Event naming the file;
- the router's AWS credentials for SigV4-signed SageMaker requests: `router.aws.existingSecret`
  (AWS shared-credentials format);
- Prometheus's token for the node daemons' metrics: `monitoring.podMonitors.nodeToken.existingSecret`
  (without one the chart creates a ServiceAccount allowed only `get nodes/metrics`, and its token).

Workload identity needs no Secret: annotate `node.serviceAccount`, `router.serviceAccount` or
`controller.serviceAccount` (`eks.amazonaws.com/role-arn` for IRSA, `iam.gke.io/gcp-service-account`
on GKE). The SageMaker provider and the router take AWS credentials from AWS's default chain when no
file is named: the environment, IRSA's web identity token, the shared files, instance metadata.

## Values
"""


def _type(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(f"`{value}`" for value in schema["enum"])
    kind = schema.get("type", "any")
    text = " or ".join(kind) if isinstance(kind, list) else str(kind)
    items = schema.get("items")
    if text == "array" and isinstance(items, Mapping) and "type" in items:
        text = f"array of {items['type']}"
    extra = schema.get("additionalProperties")
    if text == "object" and isinstance(extra, Mapping):
        inner = extra.get("type", "any")
        text = "map of " + (" or ".join(inner) if isinstance(inner, list) else str(inner))
    return text


def rows(schema: Mapping[str, Any], defaults: Any, prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    """(path, type, default, description) of every property, depth first in the schema's order."""
    for name, child in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        default = defaults.get(name) if isinstance(defaults, Mapping) else None
        nested = child.get("properties")
        shown = "" if nested or default is None else f"`{json.dumps(default)}`"
        yield path, _type(child), shown, str(child.get("description", "")).replace("\n", " ")
        if nested:
            yield from rows(child, default, f"{path}.")
        items = child.get("items")
        if isinstance(items, Mapping) and items.get("properties"):
            yield from rows(items, None, f"{path}[].")


def undescribed(schema: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The properties without a description, which the README would list bare."""
    missing = []
    for name, child in (schema.get("properties") or {}).items():
        if not child.get("description"):
            missing.append(prefix + name)
        missing += undescribed(child, f"{prefix}{name}.")
        if isinstance(child.get("items"), Mapping):
            missing += undescribed(child["items"], f"{prefix}{name}[].")
    return missing


def render(chart: Path = CHART) -> str:
    schema = json.loads((chart / "values.schema.json").read_text())
    defaults = yaml.safe_load((chart / "values.yaml").read_text())
    lines = [INTRO.format(command=COMMAND), "| Value | Type | Default | Description |", "|---|---|---|---|"]
    for path, kind, default, description in rows(schema, defaults):
        cells = (f"`{path}`", kind, default, description)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether README.md is current")
    arguments = parser.parse_args(argv)
    text = render()
    if arguments.check:
        if README.read_text() != text:
            print(f"{README} is out of date: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    README.write_text(text)
    print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
