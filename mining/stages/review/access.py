"""Who may use the review app, and as whom: the token → reviewer map and its links file.

Three ways to serve:
- open (no token): loopback only; the browser says which name it votes under (one person, or
  the simulated reviewers of the demo);
- one token (`--token`, for one person): the token stands for one reviewer, named on the
  command line (`--reviewer`, default the login name);
- per-reviewer tokens (`--reviewers alice,bob` or `--reviewers-file`): each reviewer gets a
  personal link; the token a request carries says who votes, so nobody can vote or undo as
  somebody else, or under several names.

Per-reviewer tokens are kept in a links file beside the database (`review.links.json`,
mode 0600: readable by its owner only), so a restart keeps every link valid; `--new-links`
replaces them all, and a reviewer left out of the list loses theirs.
"""

from __future__ import annotations

import getpass
import hmac
import ipaddress
import json
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from mining.files.atomic import atomic_path
from mining.errors import UserError
from mining.stages.review.vote_log import clean_name

TOKEN_BYTES = 32  # secrets.token_urlsafe(32): 43 characters, 256 bits
MIN_TOKEN = 8
TOKEN_ENV = "MINING_REVIEW_TOKEN"


def is_loopback(host: str) -> bool:
    """Only this machine can connect (and the app refuses foreign Host headers): no token needed;
    any other interface exposes votes and images to the network."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_token(host: str, token: str | None) -> str | None:
    """The token to require: --token, else $MINING_REVIEW_TOKEN; mandatory off loopback."""
    token = token or os.environ.get(TOKEN_ENV) or None
    if token is not None and len(token) < MIN_TOKEN:
        raise UserError(f"the review token must be at least {MIN_TOKEN} characters")
    if token is None and not is_loopback(host):
        raise UserError(f"serving on {host} needs a token: pass --token T or set {TOKEN_ENV}")
    return token


@dataclass(frozen=True)
class Access:
    """token → reviewer name; empty means open (loopback) mode, where the client names itself."""

    tokens: Mapping[str, str] = field(default_factory=dict)
    personal: bool = False  # one token per reviewer (kept in the links file)

    @property
    def open(self) -> bool:
        return not self.tokens

    def reviewer_for(self, given: str) -> str | None:
        """The reviewer holding token `given`, or None. Compares against every token, each in
        constant time (hmac.compare_digest), so timing says nothing about what a token holds."""
        found = None
        g = given.encode()
        for token, name in self.tokens.items():
            if hmac.compare_digest(g, token.encode()):
                found = name
        return found


def default_reviewer() -> str:
    """The login name, for the one-token mode when `--reviewer` is not given."""
    try:
        return clean_name(getpass.getuser())
    except (KeyError, OSError, UserError):
        return "reviewer"


def single(token: str, reviewer: str | None = None) -> Access:
    """The one-token mode: `token` stands for one reviewer."""
    if len(token) < MIN_TOKEN:
        raise UserError(f"the review token must be at least {MIN_TOKEN} characters")
    return Access({token: clean_name(reviewer) if reviewer is not None else default_reviewer()})


def parse_reviewers(names: str | None, file: str | Path | None) -> list[str]:
    """Reviewer names from `--reviewers a,b` and/or a file (one per line, `#` comments)."""
    raw: list[str] = [n for n in (names or "").split(",") if n.strip()]
    if file is not None:
        p = Path(file)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{p}: cannot read the reviewers file ({exc.__class__.__name__}: {exc})") from None
        raw += [line.split("#", 1)[0] for line in text.splitlines() if line.split("#", 1)[0].strip()]
    out: list[str] = []
    for n in raw:
        try:
            name = clean_name(n)
        except UserError as exc:
            raise UserError(f"reviewer {n!r}: {exc}") from None
        if name in out:
            raise UserError(f"reviewer {name!r} is listed twice")
        out.append(name)
    if not out:
        raise UserError("no reviewer names given (--reviewers alice,bob or --reviewers-file FILE)")
    return out


def links_file_for(db_path: str | Path) -> Path:
    """Beside the database: `review.sqlite` → `review.links.json`."""
    p = Path(db_path)
    return p.with_name(p.stem + ".links.json")


def _read_tokens(path: Path) -> dict[str, str]:
    """reviewer → token from an existing links file; refuses one that others can read."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UserError(f"{path}: cannot read the links file ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: the links file is not a plain file (a symlink?); remove it")
    if st.st_mode & 0o077:
        raise UserError(f"{path}: the links file is readable by others (mode {stat.S_IMODE(st.st_mode):o}), "
                        "so its tokens may have leaked; delete it (new links are made) or chmod 600 it")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        tokens = {str(k): str(v["token"]) for k, v in data["reviewers"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{path}: not a review links file ({exc.__class__.__name__}); "
                        "delete it to make new links") from None
    if len(set(tokens.values())) != len(tokens):
        raise UserError(f"{path}: two reviewers share a token; delete the file to make new links")
    return tokens


def per_reviewer(names: list[str], links_file: str | Path, *, rotate: bool = False) -> Access:
    """A token for each reviewer: kept from the links file when there (unless `rotate`), else new.
    Reviewers no longer listed lose their token. The file is rewritten by `write_links`."""
    old = {} if rotate else _read_tokens(Path(links_file))
    tokens = {name: old.get(name) or secrets.token_urlsafe(TOKEN_BYTES) for name in names}
    if len(set(tokens.values())) != len(tokens):  # pragma: no cover - 256-bit tokens do not collide
        raise UserError("token collision; run again")
    return Access({t: n for n, t in tokens.items()}, personal=True)


def links(access: Access, base_url: str) -> dict[str, str]:
    """reviewer → personal link (the page URL with the token; the page then keeps it in a cookie)."""
    return {name: f"{base_url}/?token={token}" for token, name in sorted(access.tokens.items(), key=lambda x: x[1])}


def write_links(path: str | Path, access: Access, base_url: str) -> None:
    """The links file, atomically and readable by its owner only (0600)."""
    p = Path(path)
    token_of = {name: token for token, name in access.tokens.items()}
    data = {"reviewers": {name: {"token": token_of[name], "link": link}
                          for name, link in links(access, base_url).items()}}
    try:
        with atomic_path(p) as tmp:
            os.chmod(tmp, 0o600)  # before any secret is written into it
            tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{p}: cannot write the links file ({exc.strerror or exc})") from None


def announce(access: Access, base_url: str, links_file: str | Path) -> list[str]:
    """The lines `serve` prints at start; in per-reviewer mode it (re)writes the links file first."""
    if access.personal:
        write_links(links_file, access, base_url)
        return [f"review app: one personal link per reviewer (also in {links_file}, mode 0600):",
                *(f"  {name}: {link}" for name, link in links(access, base_url).items())]
    if access.tokens:
        (token, name), = access.tokens.items()
        return [f"review app: {base_url}/?token={token}  (reviewer {name})"]
    return [f"review app: {base_url}/"]


def resolve_access(host: str, token: str | None, reviewer: str | None, reviewers: str | None,
                   reviewers_file: str | Path | None, links_file: str | Path, rotate: bool = False) -> Access:
    """The serving mode from the command line (see the module docstring); refuses mixed modes."""
    if reviewers is not None or reviewers_file is not None:
        if token:
            raise UserError("--token is the one-person mode; with --reviewers each reviewer gets a "
                            "personal link: pass one or the other")
        if reviewer is not None:
            raise UserError("--reviewer names the holder of --token; with --reviewers each link "
                            "names its reviewer")
        return per_reviewer(parse_reviewers(reviewers, reviewers_file), links_file, rotate=rotate)
    if rotate:
        raise UserError("--new-links goes with --reviewers or --reviewers-file")
    t = resolve_token(host, token)
    if t is None:
        if reviewer is not None:
            raise UserError("--reviewer names the holder of --token (without a token the page asks for a name)")
        return Access()
    return single(t, reviewer)
