"""meshsub: location-aware publish/subscribe for wireless mesh networks."""

__version__ = "0.1.0"
