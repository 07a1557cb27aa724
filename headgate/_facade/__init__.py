"""Headgate's namespaces, one noun each (`hg.schedules`, `hg.jobs`, `hg.queues`,
`hg.limits`, `hg.rates`, `hg.quarantine`, `hg.metrics`, `hg.runtime`): each a
small class over the Headgate's `Core`, its coroutines derived from its
methods by `twin`, not written twice."""
