// shards (being written)
