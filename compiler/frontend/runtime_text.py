"""`RuntimeText`: an f-string that formats traced values, written as an argument of `print`
inside a compiled function (`print(f"x = {x:.3f}")`). Its text exists only when the compiled
function runs, so the specialiser keeps its pieces and the traced values; `print` turns it
into its host-callback print (runtime/debug.py), which formats the runtime values with the
f-string's conversions and format specs at every call.

  RuntimeText(pieces, values): each piece is literal text (a str) or a field
  (index into values, conversion "" / "r" / "s" / "a", format spec).
"""


class RuntimeText:
    __slots__ = ("pieces", "values")

    def __init__(self, pieces, values):
        self.pieces = list(pieces)
        self.values = list(values)

    def template(self, first=0):
        """A str.format template of the text whose fields {first}, {first + 1}, ... are the
        values in order."""
        out = []
        for p in self.pieces:
            if isinstance(p, str):
                out.append(escape(p))
            else:
                i, conversion, spec = p
                out.append("{%d%s%s}" % (first + i, "!" + conversion if conversion else "",
                                         ":" + escape(spec) if spec else ""))
        return "".join(out)

    def __repr__(self):
        return f"<f-string formatted when the compiled function runs: {self.template()!r}>"


def escape(text):
    """`text` as literal text of a str.format template."""
    return text.replace("{", "{{").replace("}", "}}")
