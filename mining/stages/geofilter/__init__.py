"""`mining geofilter`: which YFCC100M rows become download candidates.

`stage` (`run`, and `load`: the manifest's section as its options, a `mining.settings.exclusion.Recipe`);
`mining.settings.exclusion` (shared) validates the recipe, `countries` and `areas` build the exclusion
regions, `regions` tests points fast, `filter` streams the metadata and writes the funnel.
"""
