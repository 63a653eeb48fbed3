"""The optimum an event's delivery is measured against (docs/evaluation.md, "Optimum").

``steiner`` solves it on a static graph (the connectivity at publish time), ``journeys``
over a contact history (delay-tolerant runs), ``topology`` builds either from a run's
manifest, and ``evaluate`` turns per-event rows of the job into per-run metrics. Pure
Python and numpy on the driver: the job hands over small per-event tables only.
"""
