"""SPDY framing, connection and the kubelet's streaming sessions; `peer` is the client side used here."""
