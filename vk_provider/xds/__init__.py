"""The `envoy` data plane: Envoy proxies driven over xDS by vk-provider.

From a route table to Envoy's resources: `sides` decides which endpoints each side's cluster gets
(`addresses` splits their URLs), `routes`, `clusters`, `upstream_filters` and `listener` write the
resources, `resources` assembles and parses them. Serving them: `snapshots` numbers each set,
`session` speaks the xDS protocol on one Envoy's stream, `tracking` says which Envoys have ACKed which
version (the "applied" check), `server` serves it all over gRPC and `running` feeds it route tables.
`bootstrap` writes the configuration an Envoy replica starts from.

The route table is the router's too (`vk_provider.routetable`, which neither data plane owns): both
route the same Offloads the same way; only the proxy differs.
"""
