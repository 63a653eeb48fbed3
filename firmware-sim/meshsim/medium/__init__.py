"""The radio medium: propagation models and the virtual mesh's nftables medium.

``radio`` holds the models (unit disk, linear ramp, log-distance path loss) and
the link computation shared by the discrete-event simulator and the virtual
mesh, so both tiers see the same links for the same positions.
"""
