"""Where a capture's files live: artifact storage (files, S3 or the database), uploads,
downloads.
"""
