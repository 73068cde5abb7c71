"""One capture's life: created, queued, sampled through the remote seam, analysed in a
bounded child, stored; its states, its tasks and the reads of its pages.
"""
