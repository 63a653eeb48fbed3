"""Contact traces: a social-structure generator, the ONE format, trace statistics."""

from meshsim.traces.one import format_contact, read_one, write_one
from meshsim.traces.social import PRESETS, SocialModel, TraceModelError, generate, preset
from meshsim.traces.stats import TraceStats, degree_centrality, trace_stats

__all__ = ["PRESETS", "SocialModel", "TraceModelError", "TraceStats", "degree_centrality",
           "format_contact", "generate", "preset", "read_one", "trace_stats", "write_one"]
