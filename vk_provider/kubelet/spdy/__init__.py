"""SPDY/3.1, the framing the apiserver speaks to a kubelet for exec, attach and port-forward.

No maintained SPDY implementation exists for Python (PyPI has only abandoned SPDY/2-era projects), and
Kubernetes still requires it towards the kubelet, so this is a small one of our own: `frames` encodes
and decodes frames (with the zlib header compression and its SPDY/3 dictionary), `connection` runs a
server-side connection over an asyncio transport (streams, flow control, PING, RST_STREAM, GOAWAY).
"""
