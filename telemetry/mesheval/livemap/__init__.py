"""``mesheval map``: a live map of a mesh in the browser (docs/operations.md, "Live map").

The server (``server.py``) keeps a bounded window of telemetry records (``window.py``),
filled either by replaying a RUNDIR or spool (``sources.ReplaySource``) or from the
collector's MQTT stream (``sources.MqttSource``); the page (``static/``: plain JS and
SVG, served by the server itself, nothing fetched from elsewhere) rebuilds the mesh at
the time the slider selects.
"""
