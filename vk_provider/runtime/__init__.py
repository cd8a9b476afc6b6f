"""What every long-running vk-provider process shares, and nothing about Kubernetes.

`queueing` is the keyed work queue with its one worker loop: a reconcile pass returns when to look
again, raising backs the key off, and that mapping lives in one place for the node and the
controller alike. `signals` runs a daemon's main coroutine until SIGTERM or SIGINT: the first drains,
the second exits at once.
"""
