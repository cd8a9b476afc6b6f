"""The virtual node's kubelet API: the HTTPS endpoint the apiserver and metrics-server call.

- `routes`: the handlers (logs, stats, metrics, pods, running pods, health, the daemon's metrics),
  over a `KubeletBackend` of plain callables that the node daemon builds; nothing here imports the
  node;
- `logoptions`: the kubelet's log query options, validated;
- `stats`: the v1alpha1 Summary and the resource metrics, built from provider usage;
- `certificates`: the serving certificate, through a kubelet-serving CSR or from files, rotated;
- `auth`: authentication (client certificate or TokenReview) and authorization (SubjectAccessReview);
- `server`: TLS, the middleware chain and the aiohttp runner.
"""
