"""The capture pages: list, detail, dump, downloads, comments, tags, import, keyword sets."""
