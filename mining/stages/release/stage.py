"""A distractor set that can be published: faces blurred, licences chosen, a dataset card.

`mining release` takes the selection (`mining select`) and writes RELEASE/:
- `jpg/<3 hex>/<key>.jpg` (revisitop's R1M layout, `mining.settings.layout`): every released image
  with the faces found in it blurred; an image where no face is found is a byte copy.
  Faces are looked for in the image as it is shown (EXIF orientation applied,
  `mining.photos.imagedecode`); a blurred image is written upright, with no orientation tag.
- `distractors.txt` (the released paths, in rank order, as `revisitop1m.txt`),
  `release.parquet` (one row per selected image: released or why not, faces, blurred, sha256),
  `ATTRIBUTION.md/.csv` (select's, for the released images), `README.md` (the dataset card),
  `stats.json`, optionally `webdataset/release-NNNNNN.tar` (`--tar`), and `SHA256SUMS`
  (`sha256sum -c SHA256SUMS` inside RELEASE/ checks every other file).

Four steps, a module each: `selection` (its `check`: settings and inputs refused before any
work, the selection read), `plan` (the images the licence policy lets through, and the staging
folder a stopped run resumes in), `blur` (faces found and blurred: MTCNN, its module says how)
and `publish` (the files above, then the staging folder swapped in for OUT).

Licences (`mining.publishing.licences`: known only when the URL is exactly one of YFCC100M's licence
URLs and the name agrees): `commercial` keeps the licences that allow commercial use (CC BY,
BY-SA, BY-ND, CC0, the Public Domain Mark, "No known copyright restrictions", US Government
Work); `all` keeps every known open licence; a list keeps the licences it names (YFCC name,
URL or code such as `by-sa`). Images under an unknown licence are never released; the card
counts them. NoDerivs images (BY-ND, BY-NC-ND) are never
modified: released as byte copies when no face is found, left out when one is.

Same inputs give the same bytes: images in rank order, fixed encoder settings, sorted
checksums, tar members in order with fixed mtime/owner.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mining.files import atomic
from mining.settings.options import AuditOptions, ReleaseOptions, defaults
from mining.stages.release import blur, plan, publish, selection
from mining.stages.release.blur import DEFAULT_MARGIN


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """What `mining release` reads: the selection and its images; the rest feeds the card."""

    selected: Path  # `mining select`'s folder (or its distractors.parquet)
    images: Path  # the download root
    candidates: Path | None = None  # candidates Parquet: titles and pages for ATTRIBUTION
    candidates_stats: Path | None = None  # geofilter stats.json: the funnel in the card
    evaluation: Path | None = None  # evaluation.json: the hardness table in the card
    manifest: Path | None = None  # the run's manifest, named and hashed in the card
    audit: Path | None = None  # AUDIT/audit.json: the set's measured leak rate, in the card (release gate)
    descriptors: tuple[Path, ...] = ()  # with options.kit: the method folders the run evaluated


def run(*, inputs: Inputs, out: Path, options: ReleaseOptions, target: AuditOptions | None = None, workers: int = 1,
        margin: float = DEFAULT_MARGIN, detector_factory: Any = None, progress: bool = False) -> dict:
    """`mining release`: see the module docstring and docs/formats.md. One run per OUT at a time:
    a second run into the same OUT is refused while the first holds its lock (`.OUT.lock` beside
    it). A stopped run (killed, out of time on a cluster) resumes where it stopped when rerun with
    the same inputs and settings: the images it finished are not checked again (`plan.resume`).

    `target`: the leak rate and confidence the audit's recomputed bound must meet, and whether a
    bound over it is allowed (`over_target`; the manifest's audit section, default its defaults).
    `margin`: the blurred box's growth on each side; `detector_factory`: makes each worker's face
    detector from (threshold, min_face); default `blur.FaceDetector`."""
    with atomic.exclusive(out.parent / f".{out.name}.lock", f"{out}: another `mining release` is writing this "
                          "release now; wait for it to finish (a stopped one resumes when run again)"):
        sel = selection.check(inputs, out, options, target or defaults("audit"), workers, margin)
        planned = plan.work(sel, inputs.images, out, options, margin)
        outcome = blur.images(sel.frame, planned, inputs.images, options, margin, workers, detector_factory, progress)
        return publish.release(inputs=inputs, out=out, options=options, margin=margin, sel=sel, plan=planned,
                               outcome=outcome)
