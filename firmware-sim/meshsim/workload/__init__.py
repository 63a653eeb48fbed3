"""The applications of the virtual mesh: a scenario's workload, played over MQTT on each device."""
