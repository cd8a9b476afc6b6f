"""The GPU-pressure policy: moves inference out when training needs the home GPUs, and back when it is done.

Runs in the controller process. `names` holds its wire contract (the OffloadPolicy resource, the
annotations people and the policy set on Offloads and nodes, the taints); the rest is private.
"""
