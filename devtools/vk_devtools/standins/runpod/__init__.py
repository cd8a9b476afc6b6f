"""An offline stand-in for RunPod's REST API v2 and its per-pod HTTP proxy, written from RunPod's
published OpenAPI document, so the runpod provider is tested against what RunPod would accept or refuse.

Written from the OpenAPI 3.1 document of `https://api.runpod.io/v2` (as stored in runpod/docs at commit
098c7fb, 2026-08-18), it answers as the reference says the real API does:

- **auth**: `Authorization: Bearer <key>`; missing, malformed or wrong keys get 401 problem documents;
- **validation**: unknown fields and wrong types in a body are 422 with an `errors` list; handler rules
  (exactly one of `gpu`/`cpu`, a GPU type the catalog lacks, more GPUs than a machine has, no stock) are
  400, as the reference's table of create failures describes;
- **pods** (`GET/POST /v2/pods`, `GET/PATCH/DELETE /v2/pods/{id}`): created PROVISIONING, then STARTING,
  then RUNNING after the profile's delays (or held, to be moved by hand), and answering through the
  proxy once the model has loaded (the profile's load time); EXITED, ERROR and TERMINATED by the
  control API; a deleted pod is gone (404);
- **logs** (`GET /v2/pods/{id}/logs`): Server-Sent Events with `id:` and a JSON `data:` of `ts`,
  `source` (`container` or `system`) and `line`; `tail`, `since` and `Last-Event-ID` as documented; the
  stream stays open and carries new lines until the pod is deleted;
- **catalog** (`GET /v2/catalog/gpus`): types with per-cloud prices and ceilings; availability with
  `include=AVAILABILITY&product=POD`, which may be set per GPU and cloud through the control API;
- **proxy**: each RUNNING pod serves every `<port>/http` it exposes as a real HTTP app on its own local
  port, reached through one front that stands in for `https://<podId>-<port>.proxy.runpod.net`;
  the provider's `proxy_url_template` is `FakeRunPod.proxy_url_template`; 404 for an unknown pod,
  502 while nothing serves the port, 524 after the profile's request timeout (RunPod's is 100 s);
- **profiles** (`profile`): `FAST`, the default, answers at once; `REALISTIC` is RunPod as documented:
  a ~7 min cold start (provisioning, image pull, model load), the proxy's 100 s timeout, and per-key
  rate limits (429 with `Retry-After`; `RateLimit` and `RateLimit-Policy` on every authenticated
  answer); any profile may add capacity refusals at a seeded rate, an account balance (402) and GPU
  pools the account may not use (403); each figure's source is in `profile`. Time is the stand-in's
  `clock`: a test passes a `ManualClock` and moves it;
- **faults on demand** (`/_control`, no auth): statuses, hangs, dropped connections, lost answers,
  vanishing pods, pods forced into ERROR, a seeded fraction of all requests failing at random, capacity
  refusals (400 "no capacity" on a type the catalog lists) per GPU type, data center and cloud, and the
  profile changed while it runs.

Everything is in one process: `FakeRunPod` is started in the test's event loop, `control` drives it
over HTTP (the same API an out-of-process user would call; `python -m vk_devtools.standins.runpod`
runs it standalone). It lives here, not under tests/, so integration tests and development clusters can
use it as well, and because it is type-checked with the rest.

Not simulated: CPU pods, templates, network volumes, pod actions (`/action`), clusters, billing
(spending the balance: it is only compared with a create's first hour), serverless endpoints and their
own limits, more than one API key (the rate limits count the stand-in's one key), the proxy's
connection limits other than its request timeout, a load time that varies between pods (each takes
the profile's), and weights downloaded again after a pod idles.

The modules, each importing only those above it:
- `clock`: the time every delay is slept on (`ManualClock` for tests);
- `profile`: the timings and behaviours (`Profile`, `FAST`, `REALISTIC`, `FLASHBOOT`) and their sources;
- `ratelimit`: the per-key quota windows and their headers;
- `catalog`: the GPU types, data centers and stock, and the catalog's query and answers;
- `capacity`: capacity refusals that contradict the catalog, scripted or seeded;
- `account`: the account's refusals of a create (403 pool, 402 balance);
- `pods`: the pods' records, statuses, transitions and logs;
- `schema`: the request bodies' validation;
- `proxy`: the apps behind RUNNING pods (`ServedPod`, `PodAppFactory`, `echo_app`) and the proxy front;
- `api`: the REST handlers under `/v2` and their problem documents;
- `control`: the control plane (`/_control`: faults, capacity refusals, the profile, the request
  record) and its client;
- `standin`: all of them wired together (`FakeRunPod`, `running_fake`);
- `workloads`: the demo's token server as a pod's app;
- `server` (and `__main__`): the command line, the one place that maps `--pod-app tokens` to `workloads`.
"""
