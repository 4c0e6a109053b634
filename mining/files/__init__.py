"""Files: written whole or not at all, another stage's tables and user YAML read with one clear refusal, plain names inside a folder, SHA256SUMS, the labels of answer files."""
