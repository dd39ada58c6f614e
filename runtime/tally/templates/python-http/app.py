"""{{name}}: a Tally function that returns its input unchanged."""


def handle(input: bytes) -> bytes:
    """Echoes the input."""
    return input
