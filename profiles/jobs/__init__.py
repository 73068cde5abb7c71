"""Whole-job work: every rank of a run captured or dumped at once, the job report, and the
group page.
"""
