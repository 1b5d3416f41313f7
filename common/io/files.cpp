// files (being written)
