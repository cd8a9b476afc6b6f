"""The policy as a Kueue AdmissionCheck controller: training waits, holding no GPU, until inference has left.

Kueue admits on quota, not on free GPUs: inference it does not manage is invisible to it, so an
admitted gang can sit Pending while inference holds the GPUs. A ClusterQueue that lists one of our
AdmissionChecks makes Kueue reserve the Workload's quota and then wait for us: the Workload is demand
for the policy that serves the check (a gang, flipped for at once), and the check turns `Ready` only
once the free, healthy home GPUs cover it, with `podSetUpdates` that let its pods past the reservation
taint. `names` is the wire contract (controller name, Kueue API); `workload` and `verdict` are pure;
`checks` talks to the apiserver.
"""
