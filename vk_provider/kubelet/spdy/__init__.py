"""SPDY/3.1, the framing the apiserver speaks to a kubelet for exec, attach and port-forward.

No maintained SPDY implementation exists for Python (PyPI has only abandoned SPDY/2-era projects), and
Kubernetes still requires it towards the kubelet, so this is a small one of our own:
`vk_provider.kit.spdyframes` encodes and decodes frames (with the zlib header compression and its
SPDY/3 dictionary; in the kit, since the `kubernetes` provider tunnels port-forward through it too),
`connection` runs a server-side connection over an asyncio transport (streams, flow control, PING,
RST_STREAM, GOAWAY).
"""
