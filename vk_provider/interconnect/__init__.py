"""The interconnect exporter: a node's InfiniBand and NVLink error counters as Prometheus metrics.

Most failures of multi-node GPU work are failures of the links between GPUs, and no exporter off the
shelf publishes them as rates. `vk-provider interconnect-exporter` runs on each GPU node (a DaemonSet)
and every `--interval-seconds`:

- reads the kernel's InfiniBand counters under `<root>/class/infiniband/<device>/ports/<port>/`
  (`sysfs`), whatever root it is given, so it runs unchanged on a node (`/sys`) and in tests (a folder
  laid out the same way);
- optionally reads the NVLink error counters a dcgm-exporter serves (`nvlink`);
- publishes each counter's running total (`_total`, for Prometheus' `rate()`) and its rate over the
  last interval (`_per_second`, for readers without PromQL, the OffloadPolicy among them) (`rates`,
  `collector`), and serves them on `/metrics` (`exporter`).

What is read and published, metric by metric, is `names`.
"""
