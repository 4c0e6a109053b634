"""Which licence a photo is under, and which licences a release keeps: one classifier.

A licence is known only when the metadata row's URL is exactly one of the licence URLs
YFCC100M (Flickr) uses AND its name agrees with that URL:
- Creative Commons `http(s)://[www.]creativecommons.org/licenses/<code>/<version>/` with
  <code> by, by-sa, by-nd, by-nc, by-nc-sa, by-nc-nd and <version> 2.0 (YFCC100M's), named
  "Attribution License", "Attribution-ShareAlike License", ... (YFCC100M's names);
- CC0 `.../publicdomain/zero/1.0/` ("Public Domain Dedication (CC0)"), the Public Domain Mark
  `.../publicdomain/mark/1.0/` ("Public Domain Mark"), "No known copyright restrictions"
  `http(s)://[www.]flickr.com/commons/usage/` and "United States Government Work"
  `http(s)://www.usa.gov/copyright.shtml` (Flickr's other licences).
The URL is parsed, not searched: no user, port, query or fragment, the host and path exact
(a CC path inside another host's URL is not CC). Names compare without case and extra spaces.
Anything else (All Rights Reserved, a CC URL under another licence's name, a missing name or
URL) is `unknown` (`licence_code` → None) and never released under any policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mining.errors import UserError

# licence codes: what each allows
COMMERCIAL = ("by", "by-sa", "by-nd", "cc0", "pdm", "nkcr", "us-gov")
OPEN = COMMERCIAL + ("by-nc", "by-nc-sa", "by-nc-nd")
POLICIES = ("commercial", "all")
UNKNOWN = "unknown licence"  # the card's and select's label for `None`

CC_NAMES = {
    "by": "Attribution License",
    "by-sa": "Attribution-ShareAlike License",
    "by-nd": "Attribution-NoDerivs License",
    "by-nc": "Attribution-NonCommercial License",
    "by-nc-sa": "Attribution-NonCommercial-ShareAlike License",
    "by-nc-nd": "Attribution-NonCommercial-NoDerivs License",
}
CC_VERSIONS = ("2.0",)  # the version of every CC licence URL in YFCC100M
_CC_HOSTS = ("creativecommons.org", "www.creativecommons.org")
# code -> (name, hosts, path) of the licences that are not CC <code>/<version>
OTHER = {
    "cc0": ("Public Domain Dedication (CC0)", _CC_HOSTS, "/publicdomain/zero/1.0/"),
    "pdm": ("Public Domain Mark", _CC_HOSTS, "/publicdomain/mark/1.0/"),
    "nkcr": ("No known copyright restrictions", ("flickr.com", "www.flickr.com"), "/commons/usage/"),
    "us-gov": ("United States Government Work", ("www.usa.gov",), "/copyright.shtml"),
}


def _norm(name: str) -> str:
    return " ".join(name.split()).casefold()


def _url_code(url: str) -> str | None:
    """The licence code of an exact licence URL, else None."""
    try:
        u = urlsplit(url)
    except ValueError:
        return None
    if u.scheme.lower() not in ("http", "https") or u.query or u.fragment or url != url.strip():
        return None
    host = u.netloc.lower()  # netloc, not hostname: a user or port makes it unknown
    if host in _CC_HOSTS:
        parts = u.path.split("/")  # "/licenses/by/2.0/" -> ["", "licenses", "by", "2.0", ""]
        if len(parts) == 5 and parts[0] == "" and parts[1] == "licenses" and parts[2] in CC_NAMES \
                and parts[3] in CC_VERSIONS and parts[4] == "":
            return parts[2]
    for code, (_, hosts, path) in OTHER.items():
        if host in hosts and u.path == path:
            return code
    return None


def licence_name(code: str) -> str:
    """YFCC100M's name of a known licence code."""
    return CC_NAMES[code] if code in CC_NAMES else OTHER[code][0]


def licence_code(name: Any, url: Any) -> str | None:
    """`by`, `by-nc-sa`, … `cc0`, `pdm`, `nkcr`, `us-gov` when `url` is exactly that licence's
    URL and `name` is its name; None (unknown) otherwise. See the module docstring."""
    if not isinstance(name, str) or not isinstance(url, str):
        return None
    code = _url_code(url)
    if code is None or _norm(name) != _norm(licence_name(code)):
        return None
    return code


def licence_label(name: Any, url: Any) -> str:
    """What a count of photos per licence is keyed by: the known licence's name, or UNKNOWN."""
    code = licence_code(name, url)
    return UNKNOWN if code is None else licence_name(code)


def noderivs(code: str | None) -> bool:
    return code is not None and code.endswith("-nd")


@dataclass(frozen=True)
class Policy:
    """Which licences a release keeps: `commercial`, `all`, or the names/URLs/codes listed.
    An unknown licence (`licence_code` None) is kept by none."""

    spec: tuple[str, ...]

    @classmethod
    def parse(cls, spec: str | list[str] | tuple[str, ...]) -> Policy:
        items = (spec,) if isinstance(spec, str) else tuple(spec)
        if not items or any(not isinstance(s, str) or not s.strip() for s in items):
            raise UserError("licences: give `commercial`, `all` or a list of licence names, URLs or codes")
        if len(items) > 1 and any(s in POLICIES for s in items):
            raise UserError(f"licences: `commercial` and `all` stand alone, not in a list ({', '.join(items)})")
        return cls(items)

    @property
    def label(self) -> str:
        return self.spec[0] if self.spec[0] in POLICIES else "list: " + ", ".join(self.spec)

    def allows(self, name: Any, url: Any, code: str | None) -> bool:
        if code is None:
            return False
        if self.spec == ("commercial",):
            return code in COMMERCIAL
        if self.spec == ("all",):
            return True
        return any(s == name or s == url or s.lower() == code for s in self.spec)


__all__ = ["licence_code", "licence_name", "licence_label", "noderivs", "Policy", "COMMERCIAL", "OPEN",
           "POLICIES", "UNKNOWN"]
