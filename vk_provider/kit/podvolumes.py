"""Which of a pod's volumes a provider that starts one image on its own disk can honour.

RunPod and SageMaker start the image with no way to mount anything into it or put files in it. So:

- an `emptyDir` is kept: it is a folder of the container's own disk there, empty at start as the
  kubelet's would be (the image or the program creates the folder if the image lacks it);
- the home cluster's service-account token volume (`kube-api-access-*`, which the API server adds to
  every pod) is left behind: the pod runs without credentials to this cluster;
- anything else (a Secret, a ConfigMap, a PersistentVolumeClaim, a hostPath...) the container would
  silently start without, so the pod is refused, naming each such volume.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vk_provider.errors import InvalidPodError

SERVICE_ACCOUNT_VOLUME_PREFIX = "kube-api-access-"


def volume_kinds(volume: Mapping[str, Any]) -> list[str]:
    """The volume's source keys (`emptyDir`, `secret`, ...): every key but its name."""
    return sorted(key for key in volume if key != "name")


def is_home_token_volume(volume: Mapping[str, Any]) -> bool:
    """The projected volume the API server adds for the pod's service-account token."""
    return str(volume.get("name", "")).startswith(SERVICE_ACCOUNT_VOLUME_PREFIX) and volume_kinds(volume) == [
        "projected"
    ]


def refuse_volumes_beyond_own_disk(pod_spec: Mapping[str, Any], provider: str) -> None:
    """InvalidPodError naming every volume but emptyDir and the home token volume."""
    refused = [
        f"{volume.get('name', '')} ({', '.join(volume_kinds(volume)) or 'no source'})"
        for volume in pod_spec.get("volumes") or ()
        if not is_home_token_volume(volume) and volume_kinds(volume) != ["emptyDir"]
    ]
    if refused:
        raise InvalidPodError(
            f"{provider} cannot mount volumes into the container (only emptyDir, a folder of its own "
            f"disk there, is kept); it would start without: {', '.join(refused)}. Pass the values as "
            "environment variables (env valueFrom and envFrom are resolved by the node) or build the "
            "files into the image"
        )
