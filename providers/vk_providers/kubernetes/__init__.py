"""The `kubernetes` provider: each pod of the node runs as a pod of a remote Kubernetes cluster.

In the provider's own namespace of the remote cluster (`namespace`, created if missing), a pod becomes
a Pod named `<name_prefix>-<pod UID>`, a Service of the same name over its container ports, a Secret
`<name_prefix>-<pod UID>-env` holding its resolved environment, and a Secret
`<name_prefix>-<pod UID>-vol-<n>` for each ConfigMap, Secret or projected volume, holding its files
(see `translate` for the exact mapping). Everything carries the pod's UID, namespace and name and
this node's name, so creates are idempotent and `list_pods` finds the node's pods after a restart.

Why a bare Pod and not a Deployment of one replica: the home cluster already runs the controller that
owns the pod (its ReplicaSet, Job or StatefulSet) and decides about replacements; a remote ReplicaSet
would be a second controller that replaces a failed pod behind the home one's back, so the home pod
could never fail (the home ReplicaSet would never react) and `restartPolicy: Never` or `OnFailure`
(a Job's pods) could not be expressed at all, since a Deployment only takes `Always`. A bare Pod maps
one to one: phase, container states, restart counts, the grace period of a deletion. A remote pod that
is lost is noticed by the node (the state reads as gone) and created again. Liqo and Admiralty, which
also run pods in another cluster, create bare Pods for the same reasons.

The environment: the node hands providers each container's variables resolved (envFrom, ConfigMap and
Secret keys, `$(VAR)`, the downward API); they are copied into the env Secret, and the remote
containers read them from it. The remote pod's IP and host IP are read over there (`status.podIP` and
friends), since a server must bind to the address it really has.

Volumes: the node also reads the files of the pod's ConfigMap, Secret and projected volumes
(`PodRequest.volume_files`, with the kubelet's items, modes and optional objects; a missing mandatory
one keeps the pod Pending with `FailedMount`). Each volume's files are copied into a Secret of their
own (a Secret even for a ConfigMap, so contents stay private) and mounted as a Secret volume of the
same name whose `items` put every file at its path with its mode, so the containers' `volumeMounts`
(mountPath, subPath, readOnly) apply unchanged. The copy is made when the pod is created: later changes
to the home ConfigMaps and Secrets do not reach the remote files (a kubelet would update them; restart
the pod to pick them up).

Not supported, refused with InvalidPodError naming the volume or field: volumes other than `emptyDir`,
`configMap`, `secret` and `projected` volumes of ConfigMaps and Secrets only (so PVC, hostPath,
`downwardAPI`, and projected volumes with `serviceAccountToken`, `downwardAPI`, `clusterTrustBundle`
or `podCertificate` sources), and `hostNetwork`, `hostPID`, `hostIPC`. Not carried: the home service
account token volume (the remote pod runs without API credentials), the home pod's `imagePullSecrets`
(see `image_pull_secrets`), `hostPort`, node selectors and affinity (the provider's own
`node_selector` and `tolerations` apply), remote service links (the home pod's are in its environment
already).
Update: only container images change, as in Kubernetes.

The traffic address, where the router sends the pod's traffic (the port named `http`, else the first
TCP port): with `service_type: ClusterIP`, `http://<remote pod IP>:<port>`, also reported as the pod's
IP; this needs the remote pod network to be reachable from the home cluster (peered or flat networks;
in the tests both clusters run on one host). With `NodePort`, `http://<remote node IP>:<node port>`;
with `LoadBalancer`, `http://<load balancer address>:<port>` once the remote cluster has assigned one.

Settings (the provider's section of the node configuration; see `config.KubernetesSettings`):
- `kubeconfig_file` (required; a mounted Secret, re-read when it changes) and `context`;
- `namespace` (default vk-provider-remote), `service_type` (ClusterIP, NodePort or LoadBalancer),
  `node_selector` and `tolerations` for the remote pods, `image_pull_secrets` (names in the remote
  namespace), `name_prefix` (default vk);
- `call_timeout_seconds`, `max_attempts`, `backoff_initial_seconds`, `backoff_max_seconds`,
  `max_retry_after_seconds`, `breaker_failure_threshold`, `breaker_open_seconds`,
  `health_timeout_seconds`: resilience; `namespace_ready_timeout_seconds`;
- `capacity`: what the node advertises; `error_log_lines`: log lines quoted for a container that
  failed without a termination message;
- `gpu_prices_usd_per_hour`: USD per hour of one unit of each GPU (extended) resource, e.g.
  `{nvidia.com/gpu: 2.0}`; a pod costs its requests times these, for the node's spend ceiling and
  cost metric, and is of unknown price when none are set or it requests an extended resource without
  one (see `prices`).

Errors: 400 and 422 (the remote apiserver's validation) and admission refusals fail the pod with the
remote message; 409 on create means it exists (done); a quota that is exceeded, a namespace being set
up or torn down, 5xx, 429 and timeouts are temporary; 401 and RBAC refusals make the provider
unavailable. The remote credentials need, in the namespace: pods (create, get, list, delete, patch),
pods/log (get), pods/exec, pods/attach and pods/portforward (create, get: the connection is a
WebSocket upgrade of a GET, which newer apiservers authorize as create and older ones as get) for
`kubectl exec`, `attach` and `port-forward`, services and secrets (create, get, list, update, delete),
serviceaccounts (get); and, cluster-wide, namespaces (get, create), to find or make the provider's
namespace.

Cleanup: deleting a pod deletes its Pod, its Service and every Secret labelled with its UID (the env
Secret and the volume Secrets), and so does the node's orphan sweep, which deletes through the same
call. The Secrets are written just before the Pod; if the node crashed in between and the home pod
were force-deleted before it came back, they would stay (`list_pods` lists Pods only); they hold the
pod's variables and files, so the namespace should be reserved to the provider.

Capabilities: logs (the remote pod's log, with follow, tail, since, timestamps, limit and previous),
node capacity and pod prices (from `gpu_prices_usd_per_hour`). No status push (the node polls), no pod
IP before creation, no usage.
"""

from __future__ import annotations

from vk_provider.provider import ProviderContext
from vk_providers.kubernetes.config import KubernetesSettings, parse_settings
from vk_providers.kubernetes.provider import KubernetesProvider


def create_provider(context: ProviderContext) -> KubernetesProvider:
    return KubernetesProvider(context)


__all__ = ["KubernetesProvider", "KubernetesSettings", "create_provider", "parse_settings"]
