"""The one reader of user YAML: files (run manifests, the SLURM cluster file) and flag values.

A YAML file is small input that decides a lot, so it is read strictly: no anchors or aliases
(a 1 KB "billion laughs" file of nested aliases otherwise expands to gigabytes in every
walk over the document), no duplicate keys (YAML's last-one-wins would silently drop the
first), no tags beyond the plain safe types. Every refusal names the file and the line.
The document is parsed once; the same pass maps every key path to its line, so that later
validation errors can point at the line too.
"""

from __future__ import annotations

import math
import re

from pathlib import Path
from typing import Any

import yaml

from mining.errors import UserError

KeyPath = tuple[str | int, ...]

MAX_BYTES = 1 << 20  # a manifest is a few KB; anything near this is not one


def format_path(path: KeyPath) -> str:
    """`('geofilter', 'areas', 0, 'center')` → `geofilter.areas[0].center`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def flag_value(text: str, what: str) -> Any:
    """A command-line value read as YAML (`auto`, `2000`, `0.5`, `true`, `[1, 0.7071]`), so that a
    flag takes what the manifest's key takes; `what` names it in the refusal."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _index(node, (), {})
        return loader.construct_document(node) if node is not None else None
    except _Refused as exc:
        raise UserError(f"{what}: {exc.message}") from None
    except yaml.YAMLError:
        raise UserError(f"{what} is not a YAML value") from None
    finally:
        loader.dispose()


class Locator:
    """Builds error messages that point at a file's line and key path."""

    def __init__(self, source: str, lines: dict[KeyPath, int] | None = None, what: str = "manifest"):
        self.source, self.lines, self.what = source, lines or {}, what

    def line(self, path: KeyPath) -> int | None:
        for n in range(len(path), 0, -1):
            if path[:n] in self.lines:
                return self.lines[path[:n]]
        return None

    def error(self, path: KeyPath, message: str) -> UserError:
        line = self.line(path)
        at = f"{self.source} line {line}" if line else self.source
        return UserError(f"{self.what} {at}: {format_path(path)}: {message}")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors and aliases while composing (before anything grows)."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D401 - PyYAML hook
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            kind = "alias *" if isinstance(event, yaml.AliasEvent) else "anchor &"
            raise _Refused(event.start_mark, f"{kind}{event.anchor}: anchors and aliases are not allowed")
        return super().compose_node(parent, index)


class _Refused(Exception):
    def __init__(self, mark: Any, message: str):
        super().__init__(message)
        self.mark, self.message = mark, message


def _index(node: yaml.Node, path: KeyPath, out: dict[KeyPath, int]) -> None:
    """Map every key path to its 1-based line; refuse duplicate keys (and `<<` merges)."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for knode, vnode in node.value:
            if not isinstance(knode, yaml.ScalarNode):
                raise _Refused(knode.start_mark, "a key must be a plain value")
            if knode.tag == "tag:yaml.org,2002:merge":
                raise _Refused(knode.start_mark, "merge keys (<<) are not allowed")
            key = knode.value
            line = knode.start_mark.line + 1
            if key in seen:
                where = format_path(path + (str(key),))
                raise _Refused(knode.start_mark, f"duplicate key {where} (first at line {seen[key]})")
            seen[key] = line
            sub = path + (str(key),)
            out[sub] = line
            _index(vnode, sub, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            sub = path + (i,)
            out[sub] = item.start_mark.line + 1
            _index(item, sub, out)
    elif isinstance(node, yaml.ScalarNode):
        _refuse_surprising_number(node)


def _refuse_surprising_number(node: yaml.ScalarNode) -> None:
    """YAML 1.1 reads a plain `010` as octal (8) and `1:30` as base 60 (90): a setting written
    that way would silently be another number, so it is refused."""
    value = node.value
    if node.style is None and node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and (
            re.fullmatch(r"[-+]?0[0-7_]+", value) or ":" in value):
        what = "a base-60" if ":" in value else "an octal"
        raise _Refused(node.start_mark, f"{value}: YAML reads this as {what} number "
                       f"({yaml.safe_load(value)}); write the number you mean without a leading 0 or colon, "
                       "or quote it")


def number_as_text(value: Any) -> str:
    """A hint (or "") for a value read as text that is a number's spelling: quoted, or YAML 1.1's
    `1e-3` and `1e3`, which it reads as text (its floats need a dot and a signed exponent); the
    hint names a spelling YAML reads as the number."""
    if not isinstance(value, str):
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    mantissa, e, exponent = value.strip().lower().partition("e")
    if not e or not math.isfinite(number):
        return " (text, not a number: unquote it)" if math.isfinite(number) else ""
    spelled = (mantissa if "." in mantissa else f"{mantissa}.0") + "e" + (exponent if exponent[:1] in "+-" else
                                                                          f"+{exponent}")
    return f" (text, not a number: unquote it; YAML reads 1e-2 or 1e3 without a dot as text: write {spelled})"


def read_yaml(path: str | Path, what: str = "manifest") -> tuple[Any, dict[KeyPath, int]]:
    """Parse a YAML file strictly; return the document and its key-path → line index.

    Raises UserError naming the file and line on an unreadable file, invalid YAML, an
    anchor or alias, a merge key or a duplicate key.
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise UserError(f"{what} {p}: larger than {MAX_BYTES // 1024} KB; not a {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {p}: not UTF-8 text (byte {exc.start})") from None
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[KeyPath, int] = {}
        if node is not None:
            _index(node, (), lines)
        doc = loader.construct_document(node) if node is not None else None
    except _Refused as exc:
        raise UserError(f"{what} {p} line {exc.mark.line + 1}: {exc.message}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{what} {p}{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    finally:
        loader.dispose()
    return doc, lines
