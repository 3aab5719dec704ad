"""Element texts of an array as array_out prints it, for Avro arrays of text-mapped items.

Receives: the array's text (array_out: optional `[l:u]...=` dimension decoration, nested
braces, elements separated by the element type's delimiter, an element double-quoted
when it is empty, `NULL` as text, or holds a delimiter, brace, quote, backslash or
white space, with `"` and `\\` backslash-escaped inside quotes; an unquoted `NULL` is a
null element). Hands on: the element texts in row-major order (multi-dimensional arrays
flattened, as Debezium has no nested arrays), None for a null element.

Why: an Avro array of a type published as PostgreSQL's text (inet, pg_lsn, ranges,
composites, bit strings, int2vector, ...) must carry each element's own output text;
the element's Python value (a Range, a dict, an int) is not that text.

Pure; text that array_out cannot have printed raises `PluginError`.
"""

from __future__ import annotations

from service.errors import PluginError


def array_elements(text: str, delim: str = ",") -> list[str | None]:
    """array_out's text → its elements' texts (None for NULL), flattened."""
    pos = 0
    if text.startswith("["):
        eq = text.find("=")
        if eq < 0:
            raise PluginError(f"array text {text[:40]!r} has dimensions but no '='")
        pos = eq + 1
    out: list[str | None] = []
    depth = 0
    n = len(text)
    while pos < n:
        ch = text[pos]
        if ch == "{":
            depth += 1
            pos += 1
        elif ch == "}":
            depth -= 1
            pos += 1
        elif ch == delim:
            pos += 1
        elif ch == '"':
            pos += 1
            buf = []
            while pos < n and text[pos] != '"':
                if text[pos] == "\\":
                    pos += 1
                buf.append(text[pos])
                pos += 1
            if pos >= n:
                raise PluginError(f"array text {text[:40]!r} has an unterminated quote")
            pos += 1
            out.append("".join(buf))
        else:
            end = pos
            while end < n and text[end] not in (delim, "}"):
                end += 1
            item = text[pos:end]
            out.append(None if item == "NULL" else item)
            pos = end
    if depth != 0:
        raise PluginError(f"array text {text[:40]!r} has unbalanced braces")
    return out
