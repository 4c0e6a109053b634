"""The run recipe: the manifest, each stage's options, the geofilter section, the run's layout."""
