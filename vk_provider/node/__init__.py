"""The virtual node daemon: registers the Node, keeps its Lease and status, and runs its pods at a provider.

`daemon` assembles the parts and `running` runs them until a signal; `keeper` owns the Node object and
its Lease; `pods` reconciles each pod against the provider and writes its status back; `settings`
reads the daemon's configuration.
"""
