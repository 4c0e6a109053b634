"""Manifest validation: defaults filled, errors name the key, every shipped manifest valid."""


import pytest
import yaml

from mining.settings import manifest
from mining.errors import UserError

from paths import ROOT as REPO


@pytest.mark.parametrize("path", sorted((REPO / "manifests").glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_manifests_validate(path):
    m = manifest.load(path)
    assert m["select"]["n"] >= 1
    assert m["methods"]


def test_defaults_are_filled():
    m = manifest.load(REPO / "manifests" / "demo.yaml")
    assert m["download"]["size"] == "b"
    assert m["dask"]["cluster"] == "local"
    assert m["evaluate"]["setups"] == ["easy", "medium", "hard"]
    r1m = manifest.load(REPO / "manifests" / "r1m.yaml")  # no evaluate section: the schema's default
    assert "setups" not in (REPO / "manifests" / "r1m.yaml").read_text()
    assert r1m["evaluate"]["setups"] == ["easy", "medium", "hard"]  # E, M and H, as the revisited protocol reports


def _demo() -> dict:
    return yaml.safe_load((REPO / "manifests" / "demo.yaml").read_text())


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda m: m.update(colour="blue"), ["colour", "not allowed"]),
        (lambda m: m["download"].update(size="x"), ["download.size"]),
        (lambda m: m.pop("methods"), ["methods"]),
        (lambda m: m["select"].update(n=-1), ["select.n"]),
    ],
)
def test_errors_name_the_key(edit, words):
    m = _demo()
    edit(m)
    with pytest.raises(UserError) as exc:
        manifest.validate(m, "x.yaml")
    for w in words:
        assert w in str(exc.value)
    assert "\n" not in str(exc.value)


def test_missing_and_unparsable_files(tmp_path):
    with pytest.raises(UserError, match="not found"):
        manifest.load(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [unclosed\n")
    with pytest.raises(UserError, match="YAML"):
        manifest.load(bad)


def test_load_names_the_line_and_checks_country_codes(tmp_path):
    text = (REPO / "manifests" / "demo.yaml").read_text().replace("code: FRA", "code: XYZ")
    bad = tmp_path / "m.yaml"
    bad.write_text(text)
    with pytest.raises(UserError) as exc:
        manifest.load(bad)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "XYZ" in l)
    assert "XYZ" in str(exc.value) and f"line {line}" in str(exc.value)
    text = (REPO / "manifests" / "demo.yaml").read_text().replace("review_top: 50", "review_top: -1")
    bad.write_text(text)
    with pytest.raises(UserError) as exc:
        manifest.load(bad)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "review_top" in l)
    assert "score.review_top" in str(exc.value) and f"line {line}" in str(exc.value)


def test_methods_are_checked_against_the_registry(tmp_path):
    text = (REPO / "manifests" / "demo.yaml").read_text()
    text = text.replace("methods: [cnn-gem, rsift-asmk, rsift-vlad]", "methods:\n  - cnn-gem\n  - sift-magic")
    bad = tmp_path / "m.yaml"
    bad.write_text(text)
    line = text.splitlines().index("  - sift-magic") + 1
    with pytest.raises(UserError) as exc:
        manifest.load(bad)
    assert str(exc.value) == (f"manifest {bad} line {line}: methods[1]: unknown method 'sift-magic' "
                              "(known: cnn-gem, onnx-global, rsift-asmk, rsift-vlad)")


def test_installed_plugin_methods_are_known(tmp_path, monkeypatch):
    """A plug-in registered under the `mining.methods` entry-point group passes the check."""
    dist = tmp_path / "site" / "mining_plug-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mining-plug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mining.methods]\nsift-magic = mining_plug:SiftMagic\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    m = _demo()
    m["methods"] = ["cnn-gem", "rsift-asmk", "sift-magic"]  # rsift-asmk: the demo's describe params name it
    assert manifest.validate(m, "x.yaml")["methods"] == ["cnn-gem", "rsift-asmk", "sift-magic"]


def test_one_reading_gives_every_section_with_schema_defaults(tmp_path, monkeypatch):
    """The file is parsed once; the geofilter recipe comes from that parse, and its defaults
    (like every other section's) come from the schema alone."""
    import mining.settings.manifest as mm

    reads = []
    real = mm.read_yaml
    monkeypatch.setattr(mm, "read_yaml", lambda *a, **k: reads.append(a) or real(*a, **k))
    m = manifest.load(REPO / "manifests" / "demo.yaml")
    assert len(reads) == 1
    assert isinstance(m, manifest.Manifest) and m.path == REPO / "manifests" / "demo.yaml"
    geo = manifest.schema()["properties"]["geofilter"]["properties"]
    assert "shoreline_buffer_km" not in (REPO / "manifests" / "demo.yaml").read_text()
    assert m["geofilter"]["shoreline_buffer_km"] == geo["shoreline_buffer_km"]["default"] == 1.5
    assert m.geofilter.shoreline_buffer_km == 1.5
    assert m.geofilter.photos_only is True and m.geofilter.require_geotag is True
    assert [c.code for c in m.geofilter.countries] == ["GBR", "FRA"]
    assert m["download"]["host"] == "https://live.staticflickr.com"


def test_a_stage_given_only_its_section_gets_the_same_defaults(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("geofilter:\n  sample: {n: 5}\n")
    section, where = manifest.load_section(p, "geofilter")
    assert section == {"sample": {"n": 5, "seed": 0}, "photos_only": True, "require_geotag": True,
                       "shoreline_buffer_km": 1.5}
    p.write_text("geofilter:\n  sample: {n: 0}\n")
    with pytest.raises(UserError, match=r"line 2: geofilter.sample.n: 0 is less than the minimum of 1"):
        manifest.load_section(p, "geofilter")


# ---------------------------------------------------------------- typed sections
def _literals(tp) -> set | None:
    """The allowed values of a Literal annotation (inside Optional/unions/lists too)."""
    import typing

    if typing.get_origin(tp) is typing.Literal:
        return set(typing.get_args(tp))
    found = [v for a in typing.get_args(tp) if (v := _literals(a)) is not None]
    return set().union(*found) if found else None


def _enum(sch: dict, defs: dict) -> set | None:
    if "$ref" in sch:
        return _enum(defs[sch["$ref"].split("/")[-1]], defs)
    if "enum" in sch:
        return set(sch["enum"])
    if "const" in sch:
        return {sch["const"]}
    for key in ("oneOf", "anyOf"):
        if key in sch:
            found = [e for s in sch[key] if (e := _enum(s, defs)) is not None]
            return set().union(*found) if found else None
    if sch.get("type") == "array" and "items" in sch:
        return _enum(sch["items"], defs)
    return None


def test_typed_sections_agree_with_the_schema_key_for_key():
    """Each section's options type (mining.settings.options) has the schema's keys; its Literals are the schema's enums."""
    import dataclasses
    import typing

    from mining.settings.manifest import schema
    from mining.settings.options import SECTIONS

    full = schema()
    assert set(SECTIONS) == {k for k, v in full["properties"].items() if v.get("type") == "object"} - {"geofilter"}
    for name, cls in SECTIONS.items():
        props = full["properties"][name]["properties"]
        hints = typing.get_type_hints(cls)
        assert [f.name for f in dataclasses.fields(cls)] == list(props), name
        for key, tp in hints.items():
            assert _literals(tp) == _enum(props[key], full.get("$defs", {})), (name, key)


@pytest.mark.parametrize("path", sorted(REPO.glob("manifests/*.yaml")))
def test_each_shipped_manifest_loads_into_complete_typed_sections(path):
    from mining.settings.manifest import load
    from mining.settings.options import SECTIONS, of

    m = load(path)
    assert m.methods and m.results and m["name"]
    for name in SECTIONS:
        if name == "demo" and m.demo is None:
            continue
        assert of(m, name) == of(m, name)  # every key there (the options type takes them all)
