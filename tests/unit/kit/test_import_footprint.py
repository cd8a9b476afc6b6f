"""What the daemons load and keep: kubernetes_asyncio's generated classes only when asked for, and
cached objects whose repeated strings are shared."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vk_provider.kit.kube import decode_compact

pytestmark = pytest.mark.unit

PROBE = """
import sys
import vk_provider.node.daemon
loaded = sorted(m for m in sys.modules if m.startswith("kubernetes_asyncio"))
print(len(loaded), "kubernetes_asyncio.client.models.v1_pod" in sys.modules)
from kubernetes_asyncio import client
import kubernetes_asyncio.client.models as models
from kubernetes_asyncio.client import V1ObjectMeta
print(client.CoreV1Api.__name__, models.V1Pod.__name__, V1ObjectMeta.__name__, client.ApiClient.__name__)
"""


def test_the_node_daemon_loads_no_generated_kubernetes_classes_until_someone_asks() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    first, second = result.stdout.splitlines()
    count, has_models = first.split()
    assert int(count) < 40  # the configuration, auth and transport modules, not 800 generated ones
    assert has_models == "False"
    # Code that does use them (a test, a provider) gets the whole package, as a plain import gives.
    assert second == "CoreV1Api V1Pod V1ObjectMeta ApiClient"


def test_compact_decoding_is_json_with_shared_strings() -> None:
    text = json.dumps({"metadata": {"name": "pod-1", "uid": "u" * 60}, "status": {"phase": "Running"}})
    one, two = decode_compact(text), decode_compact(text.encode())
    assert one == two == json.loads(text)
    key_one, key_two = next(iter(one["status"])), next(iter(two["status"]))
    assert key_one is key_two
    assert one["status"]["phase"] is two["status"]["phase"]
    assert decode_compact("[1, 2.5, null, true]") == [1, 2.5, None, True]
