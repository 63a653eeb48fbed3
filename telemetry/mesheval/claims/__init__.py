"""Claims files: a paper's claims as rules over mesheval's figures, and the results page.

``spec`` reads the file, ``select`` picks configurations and their figures, ``rules``
computes each verdict from its rule (pure functions of numbers, so each is tested on
figures on both sides of it), ``page`` writes the results page: tables, plots, every
verdict with its rule and tolerance, n/a where the figures cannot test the claim.
"""
