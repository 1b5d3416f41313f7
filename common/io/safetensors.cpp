// safetensors (being written)
