"""An offline stand-in for RunPod's REST API v2 and its per-pod HTTP proxy, written from RunPod's
published OpenAPI document, so the runpod provider is tested against what RunPod would accept or refuse.

Written from the OpenAPI 3.1 document of `https://api.runpod.io/v2` (as stored in runpod/docs at commit
098c7fb, 2026-08-18), it answers as the reference says the real API does:

- **auth**: `Authorization: Bearer <key>`; missing, malformed or wrong keys get 401 problem documents;
- **validation**: unknown fields and wrong types in a body are 422 with an `errors` list; handler rules
  (exactly one of `gpu`/`cpu`, a GPU type the catalog lacks, more GPUs than a machine has, no stock) are
  400, as the reference's table of create failures describes;
- **pods** (`GET/POST /v2/pods`, `GET/PATCH/DELETE /v2/pods/{id}`): created PROVISIONING, then STARTING,
  then RUNNING after configurable delays (or held, to be moved by hand); EXITED, ERROR and TERMINATED by
  the control API; a deleted pod is gone (404);
- **logs** (`GET /v2/pods/{id}/logs`): Server-Sent Events with `id:` and a JSON `data:` of `ts`,
  `source` (`container` or `system`) and `line`; `tail`, `since` and `Last-Event-ID` as documented; the
  stream stays open and carries new lines until the pod is deleted;
- **catalog** (`GET /v2/catalog/gpus`): types with per-cloud prices and ceilings; availability with
  `include=AVAILABILITY&product=POD`, which may be set per GPU and cloud through the control API;
- **proxy**: each RUNNING pod serves every `<port>/http` it exposes as a real HTTP app on its own local
  port, reached through one front that stands in for `https://<podId>-<port>.proxy.runpod.net`;
  the provider's `proxy_url_template` is `FakeRunPod.proxy_url_template`;
- **faults on demand** (`/_control`, no auth): statuses, hangs, dropped connections, lost answers,
  vanishing pods, pods forced into ERROR, and a seeded fraction of all requests failing at random.

Everything is in one process: `FakeRunPod` is started in the test's event loop, `control` drives it
over HTTP (the same API an out-of-process user would call; `python -m vk_devtools.standins.runpod`
runs it standalone). It lives here, not under tests/, so integration tests and development clusters can
use it as well, and because it is type-checked with the rest.

Not simulated: CPU pods, templates, network volumes, pod actions (`/action`), clusters, billing, the
`RateLimit` headers, and any rate limiting other than injected 429s.

The modules, each importing only those above it:
- `catalog`: the GPU types, data centers and stock, and the catalog's query and answers;
- `pods`: the pods' records, statuses, transitions and logs;
- `schema`: the request bodies' validation;
- `proxy`: the apps behind RUNNING pods (`ServedPod`, `PodAppFactory`, `echo_app`) and the proxy front;
- `api`: the REST handlers under `/v2` and their problem documents;
- `control`: the control plane (`/_control`: faults, the request record) and its client;
- `standin`: all of them wired together (`FakeRunPod`, `running_fake`);
- `workloads`: the demo's token server as a pod's app;
- `server` (and `__main__`): the command line, the one place that maps `--pod-app tokens` to `workloads`.
"""
