"""Params types that SSA text can spell: NamedTuples (such as gather's dimension numbers)
registered here print as constructor calls and parse back into the same type."""

PARAM_TYPES = {}  # class name -> NamedTuple class


def register_param_type(cls):
    """Make a NamedTuple params type printable (and parseable) in SSA text."""
    PARAM_TYPES[cls.__name__] = cls
    return cls
