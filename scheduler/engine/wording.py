"""How counts are said: "1 GPU", "2 GPUs". The one pluralising helper of the project (the
engine's reasons, the portal's messages and, through the `count` template filter, its pages);
it sits here, beside every layer, so that all of them may use it."""


def quantity(count: int, noun: str, plural: str | None = None) -> str:
    """``quantity(1, "GPU")`` is "1 GPU"; ``quantity(3, "GPU")`` is "3 GPUs"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
