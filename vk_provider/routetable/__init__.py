"""The route table both data planes serve, the router (`vk_provider.router`) and the xDS server
(`vk_provider.xds`), and how it is fed from the cluster.

`table` says what a route is and how a request matches one, `building` makes a table from the
cluster's objects (pure), `signingscope` says which traffic-auth markers a table takes, `health` checks
away endpoints itself, `feed` watches the cluster and hands each new table on, `running` is the feed's
command line and its watches while a daemon runs, `metrics` what the feed counts.
"""
