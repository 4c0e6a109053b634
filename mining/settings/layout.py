"""Where things live: a candidate's image (revisitop's R1M layout `jpg/<3 hex>/<key>.jpg`)
and every stage's outputs under a run folder (`RunLayout`).

The image key is YFCC's own photo hash (`mining.photos.flickr.yfcc_hash` of the row's download URL,
the key of the Multimedia Commons mirror), so our `jpg/` tree lines up with the mirror and with
any YFCC copy a user already has; a row without a download URL falls back to the MD5 of its
photo id. The path is known before downloading and is the same on every machine, run and shard
size. Stages after the download find an image through `images/index.parquet`
(`mining.photos.imageindex`), never by recomputing the key. The workflow's rules
(workflows/rules/common.smk builds ``L = RunLayout(R)``) and the report (``mining report
--run``) both take a run's paths from `RunLayout`, so a renamed file or folder is changed
once; the file names come from `mining.files.names`, which the stages, the kit and the report
use too. Its paths are ``str`` joined with ``/``: Snakemake patterns keep their wildcards
(``L.store("{method}", "{set}")``) and stay the strings the rules always used.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from mining.datasets.benchmarks import STORES
from mining.files import names
from mining.photos.flickr import yfcc_hash


def image_key(photo_id: int, download_url: str | None = None) -> str:
    """An image's key: YFCC's photo hash (`yfcc_hash` of the download URL, 16-32 hex characters),
    or, for a row without a download URL, the MD5 of the photo id's decimal string (32)."""
    if isinstance(download_url, str) and download_url:
        return yfcc_hash(download_url)
    return hashlib.md5(str(int(photo_id)).encode("ascii")).hexdigest()


def named_download_url(photo_id: int, secret: str, download_url: str | None) -> str | None:
    """The row's download URL if it names this photo (`/<id>_<secret>.`, YFCC's form), else None:
    a broken or hostile URL must never give a photo another photo's key (or image)."""
    if isinstance(download_url, str) and f"/{int(photo_id)}_{secret}." in download_url:
        return download_url
    return None


def image_relpath(photo_id: int, download_url: str | None = None) -> str:
    """Path of a candidate image relative to the download root: `jpg/abc/abc....jpg`."""
    return key_relpath(image_key(photo_id, download_url))


def key_relpath(key: str) -> str:
    """Path of the image with this key relative to the download root: `jpg/<key[:3]>/<key>.jpg`."""
    return f"jpg/{key[:3]}/{key}.jpg"


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run folder (``results/<name>``)."""

    root: str

    def path(self, *parts: str) -> str:
        """ROOT/part/... (the only place paths are joined)."""
        return "/".join((str(self.root).rstrip("/"), *parts))

    # --- stage folders -------------------------------------------------------------------
    @property
    def world(self) -> str:
        """The embedded demo world (demo manifests only)."""
        return self.path("world")

    @property
    def landmarks(self) -> str:
        return self.path("landmarks")

    @property
    def metadata(self) -> str:
        return self.path("metadata")

    @property
    def candidates(self) -> str:
        return self.path("candidates")

    @property
    def images(self) -> str:
        return self.path("images")

    @property
    def descriptors(self) -> str:
        return self.path("descriptors")

    @property
    def cascade(self) -> str:
        return self.path("cascade")

    @property
    def neardup(self) -> str:
        return self.path("neardup")

    @property
    def leakrisk(self) -> str:
        return self.path("leakrisk")

    @property
    def scores(self) -> str:
        return self.path("scores")

    @property
    def review(self) -> str:
        return self.path("review")

    @property
    def selected(self) -> str:
        return self.path("selected")

    @property
    def audit(self) -> str:
        return self.path("audit")

    @property
    def evaluation(self) -> str:
        return self.path("evaluation")

    @property
    def release(self) -> str:
        return self.path("release")

    @property
    def logs(self) -> str:
        return self.path("logs")

    @property
    def benchmarks(self) -> str:
        return self.path("benchmarks")

    # --- files -----------------------------------------------------------------------------
    @property
    def world_json(self) -> str:
        return f"{self.world}/{names.WORLD}"

    @property
    def world_metadata(self) -> str:
        return f"{self.world}/metadata/yfcc100m_dataset"

    @property
    def world_landmarks(self) -> str:
        return f"{self.world}/landmarks"

    @property
    def world_gnd(self) -> str:
        return f"{self.world_landmarks}/gnd_demo.pkl"

    def world_city_gnd(self, name: str) -> str:
        """The ground truth of one city of the demo world: gnd_demo.pkl for its only one, else
        landmarks/<name>/gnd_<name>.pkl (`mining.datasets.benchmarks.demo_names`)."""
        return self.world_gnd if name == "demo" else f"{self.world_landmarks}/{name}/gnd_{name}.pkl"

    @property
    def world_truth(self) -> str:
        return f"{self.world}/{names.TRUTH}"

    @property
    def landmarks_json(self) -> str:
        return f"{self.landmarks}/{names.LANDMARKS}"

    @property
    def metadata_stats(self) -> str:
        return f"{self.metadata}/{names.STATS}"

    @property
    def candidates_parquet(self) -> str:
        return f"{self.candidates}/{names.CANDIDATES}"

    @property
    def candidates_stats(self) -> str:
        return f"{self.candidates}/{names.STATS}"

    @property
    def images_summary(self) -> str:
        return f"{self.images}/{names.IMAGES_SUMMARY}"

    def store(self, method: str, set_name: str, benchmark: str | None = None) -> str:
        """One method's descriptor store for one set (its store.json); `benchmark`: that
        benchmark's queries or database in a run with several (`mining.datasets.benchmarks.store_dir`)."""
        where = method if benchmark is None else f"{method}/{STORES}/{benchmark}"
        return f"{self.descriptors}/{where}/{set_name}/{names.STORE}"

    @property
    def shortlist(self) -> str:
        return f"{self.cascade}/{names.SHORTLIST}"

    @property
    def shortlist_stats(self) -> str:
        return f"{self.cascade}/{names.SHORTLIST_STATS}"

    @property
    def cascade_check(self) -> str:
        return f"{self.cascade}/{names.CASCADE_CHECK}"

    @property
    def neardup_table(self) -> str:
        return f"{self.neardup}/{names.NEARDUP}"

    @property
    def neardup_stats(self) -> str:
        return f"{self.neardup}/{names.STATS}"

    @property
    def leakrisk_table(self) -> str:
        return f"{self.leakrisk}/{names.LEAKRISK}"

    @property
    def leakrisk_stats(self) -> str:
        return f"{self.leakrisk}/{names.STATS}"

    @property
    def scores_table(self) -> str:
        return f"{self.scores}/{names.SCORES}"

    @property
    def review_queue(self) -> str:
        return f"{self.scores}/{names.REVIEW_QUEUE}"

    @property
    def review_db(self) -> str:
        return f"{self.review}/{names.REVIEW_DB}"

    @property
    def decisions(self) -> str:
        """Where the review's exported decisions go unless the manifest names a file."""
        return f"{self.review}/{names.DECISIONS}"

    @property
    def distractors_txt(self) -> str:
        return f"{self.selected}/{names.DISTRACTORS_TXT}"

    @property
    def distractors_table(self) -> str:
        return f"{self.selected}/{names.DISTRACTORS}"

    @property
    def selected_stats(self) -> str:
        return f"{self.selected}/{names.STATS}"

    @property
    def audit_queue(self) -> str:
        return f"{self.audit}/{names.AUDIT_QUEUE}"

    @property
    def audit_plan(self) -> str:
        return f"{self.audit}/{names.AUDIT_PLAN}"

    @property
    def audit_db(self) -> str:
        return f"{self.audit}/{names.AUDIT_DB}"

    @property
    def audit_decisions(self) -> str:
        """The audit review's exported answers (a person exports them here, as for the review)."""
        return f"{self.audit}/{names.DECISIONS}"

    @property
    def audit_json(self) -> str:
        return f"{self.audit}/{names.AUDIT}"

    @property
    def audited_table(self) -> str:
        """The selection less what the audit found (what `mining release` publishes)."""
        return f"{self.audit}/{names.DISTRACTORS}"

    @property
    def evaluation_json(self) -> str:
        return f"{self.evaluation}/{names.EVALUATION}"

    @property
    def evaluation_md(self) -> str:
        return f"{self.evaluation}/{names.EVALUATION_MD}"

    @property
    def evaluation_summary(self) -> str:
        """The result as Markdown for a document (`make demo` copies the demo's to docs/demo.md)."""
        return f"{self.evaluation}/{names.EVALUATION_SUMMARY}"

    @property
    def report(self) -> str:
        return self.path(names.REPORT)

    @property
    def release_card(self) -> str:
        return f"{self.release}/README.md"

    @property
    def release_sums(self) -> str:
        return f"{self.release}/SHA256SUMS"

    @property
    def release_txt(self) -> str:
        return f"{self.release}/{names.DISTRACTORS_TXT}"

    def log(self, name: str) -> str:
        """A rule's log file (LOGS/<name>.log)."""
        return f"{self.logs}/{name}.log"

    def bench(self, name: str) -> str:
        """A rule's Snakemake benchmark TSV (BENCH/<name>.tsv)."""
        return f"{self.benchmarks}/{name}.tsv"
