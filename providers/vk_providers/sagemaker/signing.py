"""SigV4 signatures for requests to SageMaker endpoints: the shared `vk_provider.aws_signing`.

The signer lives in the core package because the router, which must not import providers, signs the
requests it sends to SageMaker endpoints; the provider hands out the same signer with its own
credentials (`SageMakerProvider.request_signer`).
"""

from __future__ import annotations

from vk_provider.aws_signing import SERVICE, RequestSigner, sign_request

__all__ = ["SERVICE", "RequestSigner", "sign_request"]
