"""The one exception the engine raises on input it cannot use."""


class ProfileError(ValueError):
    """Input the engine cannot use; the message is a one-line reason for people."""
