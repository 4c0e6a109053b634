"""CLI for `mining review`: import a queue, serve the app, export decisions, simulate reviewers."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mining.files.names import AUDIT_QUEUE, DECISIONS, REVIEW_QUEUE, TRUTH
from mining.settings import options
from mining.flags import add_landmarks_flag


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "review", help="manual check of the review queue in a local web app (SQLite-backed)",
        description="Import the review queue into a SQLite database, serve the review web app, "
                    "export the reviewers' majority decisions to Parquet.")
    verbs = p.add_subparsers(dest="review_command", required=True, metavar="ACTION")

    imp = verbs.add_parser("import", help="add a queue's new items to the database (idempotent; an item already "
                                          "imported is never rewritten)")
    imp.add_argument("queue", help=f"{REVIEW_QUEUE} from `mining score`, or AUDIT/{AUDIT_QUEUE} from "
                                   "`mining audit draw` (into a database of its own)")
    imp.add_argument("--db", required=True, help="review database (created if absent)")

    srv = verbs.add_parser("serve", help="serve the review app")
    srv.add_argument("--db", required=True, help="review database")
    srv.add_argument("--images", required=True, help="download root (ROOT/jpg/<3hex>/<key>.jpg)")
    add_landmarks_flag(srv, then="their images give the query crops")
    srv.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1; others need a token)")
    srv.add_argument("--port", type=int, default=8765)
    srv.add_argument("--token", default=None,
                     help="one person's token, required on every request (default: $MINING_REVIEW_TOKEN); "
                          "mandatory when --host is not loopback, unless --reviewers")
    srv.add_argument("--reviewer", default=None,
                     help="with --token: the reviewer it stands for (default: your login name)")
    srv.add_argument("--reviewers", default=None, metavar="NAME,NAME",
                     help="a personal link (token) per reviewer: their votes and undos are theirs alone")
    srv.add_argument("--reviewers-file", default=None, metavar="FILE",
                     help="reviewer names, one per line (# comments), as --reviewers")
    srv.add_argument("--links-file", default=None, metavar="FILE",
                     help="where the personal links are kept, mode 0600, so a restart keeps them "
                          "(default: beside the DB, review.links.json)")
    srv.add_argument("--link-base", default=None, metavar="URL",
                     help="how reviewers reach the app, for the printed links (default http://HOST:PORT)")
    srv.add_argument("--new-links", action="store_true",
                     help="replace every reviewer's token: the old links stop working")

    exp = verbs.add_parser("export", help=f"write {DECISIONS} (majority of each reviewer's latest vote)")
    exp.add_argument("--db", required=True)
    exp.add_argument("--out", required=True, help=DECISIONS)
    exp.add_argument("--complete", action="store_true",
                     help="fail (exit 2) while some queued item has no vote yet")

    sim = verbs.add_parser("simulate", help=f"demo only: simulated reviewers answer from {TRUTH} via the API")
    sim.add_argument("--db", required=True)
    sim.add_argument("--truth", required=True, help=f"the demo world's {TRUTH}")
    sim.add_argument("--images", default=None, help="image root (default: a folder beside the DB; unused)")
    sim.add_argument("--error-rate", type=float, default=0.0, help="chance each vote is wrong")
    options.add_flags(sim, "review", keys=["reviewers"])
    options.add_flags(sim, "demo", keys=["seed"])  # the demo world's seed seeds its reviewers too
    sim.add_argument("--match", choices=["any", "same"], default="any",
                     help="y for an image of ANY landmark (default, as R1M) or only the queued one")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return {"import": _import, "export": _export, "serve": _serve, "simulate": _simulate}[args.review_command](args)


def _import(args: argparse.Namespace) -> int:
    from mining.files import answers
    from mining.stages.review import database, queue_import

    queue = Path(args.queue)
    con = database.connect(args.db, create=True)
    try:
        r = queue_import.import_queue(con, queue, scores_fingerprint=answers.stated_fingerprint(queue.parent))
    finally:
        con.close()
    _report({"rows": r.rows, "added": r.added, "kept": r.kept})
    return 0



def _export(args: argparse.Namespace) -> int:
    from mining.errors import UserError
    from mining.stages.review import database, decisions

    con = database.connect_readonly(args.db)
    try:
        if args.complete:
            _, unvoted = decisions.export_rows(con)
            if unvoted:
                raise UserError(f"{unvoted} queued item(s) have no vote yet; "
                                f"open the app with `mining review serve --db {args.db} ...`")
        _report(decisions.export(con, args.out))
    finally:
        con.close()
    return 0


def _serve(args: argparse.Namespace) -> int:
    from mining.stages.review.access import announce, links_file_for, resolve_access
    from mining.stages.review.app import create_app
    from mining.stages.review.hosting import serve

    links_file = args.links_file or links_file_for(args.db)
    access = resolve_access(args.host, args.token, args.reviewer, args.reviewers, args.reviewers_file,
                            links_file, args.new_links)
    app = create_app(db_path=args.db, images=args.images, landmarks=args.landmarks, access=access)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    base = (args.link_base or f"http://{shown}:{args.port}").rstrip("/")
    for line in announce(access, base, links_file):
        print(line, file=sys.stderr)
    print("(Ctrl-C to stop)", file=sys.stderr)
    serve(app, args.host, args.port)
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from mining.stages.review.app import create_app
    from mining.stages.review.simulate import load_truth, simulate

    truth = load_truth(args.truth)
    images = Path(args.images) if args.images else Path(args.db).resolve().parent
    app = create_app(db_path=args.db, images=images, images_required=False)
    _report(simulate(app=app, truth=truth, reviewers=options.from_args(args, "review").reviewers,
                     error_rate=args.error_rate, seed=options.from_args(args, "demo").seed, match=args.match))
    return 0


def _report(obj: dict) -> None:
    print(json.dumps(obj, sort_keys=True))
