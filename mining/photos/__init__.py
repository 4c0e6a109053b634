"""The candidate photos: YFCC100M/Flickr fields and URLs, the one image decode, images/index.parquet."""
