"""moto's SageMaker in server mode, on 127.0.0.1 and a free port.

`MotoSageMaker` runs `moto.server.ThreadedMotoServer` (start it once per test module; `reset()` empties
it between tests); boto3 reaches it through `endpoint_url`, with any credentials (moto puts everything
in account 123456789012).
"""

from __future__ import annotations

import http.client
from typing import TYPE_CHECKING

import boto3
from botocore.client import BaseClient
from moto.server import ThreadedMotoServer

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

ACCOUNT_ID = "123456789012"
"""moto's default account, where every request lands."""
TEST_ROLE_ARN = f"arn:aws:iam::{ACCOUNT_ID}:role/vk-provider-sagemaker"
GPU_INSTANCE_TYPE = "ml.g4dn.xlarge"
"""A GPU instance type both SageMaker and moto 5.2.5 accept."""


class MotoSageMaker:
    """moto in server mode on 127.0.0.1 and a free port."""

    def __init__(self, *, region: str = "us-east-1") -> None:
        self.region = region
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._address: tuple[str, int] | None = None

    def start(self) -> MotoSageMaker:
        self._server.start()
        self._address = self._server.get_host_and_port()
        return self

    def stop(self) -> None:
        if self._address is not None:
            self._server.stop()
            self._address = None

    def __enter__(self) -> MotoSageMaker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def endpoint_url(self) -> str:
        if self._address is None:
            raise RuntimeError("the moto server is not running")
        host, port = self._address
        return f"http://{host}:{port}"

    def reset(self) -> None:
        """Forget every resource of every service (moto's /moto-api/reset)."""
        if self._address is None:
            raise RuntimeError("the moto server is not running")
        connection = http.client.HTTPConnection(*self._address, timeout=10)
        try:
            connection.request("POST", "/moto-api/reset")
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"moto's reset answered {response.status}")
        finally:
            connection.close()

    def client(self) -> SageMakerClient:
        """A plain client on the server, for tests to look and to set things up behind a provider's back."""
        return boto3.client(
            "sagemaker",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id="moto-testing",
            aws_secret_access_key="moto-testing",  # noqa: S106 - moto takes any key
        )

    def runtime_client(self) -> BaseClient:
        """A sagemaker-runtime client on the server: install `SageMakerLayer.install_runtime` on it, as moto
        only answers InvokeEndpoint with a constant body."""
        client: BaseClient = boto3.client(
            "sagemaker-runtime",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id="moto-testing",
            aws_secret_access_key="moto-testing",  # noqa: S106 - moto takes any key
        )
        return client
