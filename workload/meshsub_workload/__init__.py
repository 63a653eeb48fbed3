"""The virtual mesh's workload agent: a scenario's applications on one device, over MQTT.

Installed on the devices of the virtual mesh only (``meshsub-workload``); a field
fleet does not need it. The host side (``meshsim.workload.schedule``) writes the
schedule it plays.
"""
