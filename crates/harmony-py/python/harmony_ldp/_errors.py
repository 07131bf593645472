"""The package's one exception type."""

__all__ = ["HarmonyError"]


class HarmonyError(ValueError):
    """A bad parameter, input value or report: names the field, the value and what was expected.

    Every error of ``harmony_ldp`` is a ``HarmonyError`` (a ``ValueError``); the message has the
    form ``invalid input: values[3] is -1, expected an integer in [0, 8)`` and the parts are
    attributes:

    >>> import harmony_ldp as hl
    >>> try:
    ...     hl.FrequencyOracle("grr", epsilon=-1.0, d=8)
    ... except hl.HarmonyError as e:
    ...     print(e.field, "|", e.value, "|", e.expected)
    epsilon | -1.0 | a finite number >= 0.002 and <= 20 (the range where every sampler is exactly epsilon-LDP in floating point)
    """

    def __init__(self, message: str, field: str = "", value: str = "", expected: str = "") -> None:
        super().__init__(message)
        #: The parameter, input or report field at fault (``epsilon``, ``values[3]``, ...).
        self.field = field
        #: The rejected value, as text.
        self.value = value
        #: What a valid value is, in words.
        self.expected = expected

    def __reduce__(self):  # pickles with its attributes
        return (type(self), (str(self), self.field, self.value, self.expected))


def _error(phase: str, field: str, value: object, expected: str) -> HarmonyError:
    """A HarmonyError worded like the core's (``invalid input: x is 3, expected ...``)."""
    return HarmonyError(f"{phase}: {field} is {value}, expected {expected}", field, str(value), expected)
