"""`mining download`: candidates → verified 1024 px images + a status Parquet per shard +
`index.parquet`, each photo asked of the sources in order (`sources`: Flickr, the Multimedia
Commons mirror, local folders) until one serves it.

Split like img2dataset: reader (plan shards, skip done work), downloader (one shard),
writer (atomic files / tars, status), distributor (Dask), ratelimit (cluster-wide
politeness), logger (progress, summary). `stage.run` ties them together.
"""
